"""Hostile links: every query key a page reads (from relviz.app.link_schema's registry, not a hand list) given values
no control takes (wrong types, huge, negative, NaN/inf, empty, unicode, very long, repeated, path-like, HTML and
markdown) must open the page with its defaults, a notice naming the key and what it takes, and no traceback; the
notice itself must render the link's text as text (no link, colour, icon or formula from it).

tests/test_hostile_links.py runs a seeded subset; the whole sweep (every page x every value, ~10 min under load) is
    python tests/hostile_links.py [--pages=stem,stem]
"""
from __future__ import annotations

import random
import re
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Block, Widget

REPO = Path(__file__).resolve().parents[1]

#: Values no control of relviz should take as they stand (a few may fit one key's schema: checked per key below).
HOSTILE = ["abc", "", "NaN", "inf", "-Infinity", "1e999", "-1", "-99999999999999999999", "9" * 30, "1" * 5000,
           "１２", "٣", "²", "1.5", "0x10", "1_000", " 7 ", "True", "../../etc/passwd", "/etc/passwd",
           "file:///etc/passwd", "<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
           "`[x](https://evil.example)`", "[click](https://evil.example)", ":red[x] :material/home:", "$x^2$",
           "é" * 300, "\u202etxt", "a\nb", "x" * 20_000]

#: Text a page must never show: a traceback, a server path, a rendered piece of the link's markup.
_TRACE = re.compile(r"Traceback|File \"/|/etc/passwd:|site-packages|\.py\", line")


def page_keys(page: str) -> list[str]:
    """The keys ``page`` reads, from the registry: its fixed keys and one name in each of its key families."""
    from relviz.app.link_schema import APP_KEYS, LINK_ONLY_PARAMS, PAGE_KEY_FAMILIES, PAGE_PARAMS

    keys = list({**PAGE_PARAMS.get(page, {}), **LINK_ONLY_PARAMS.get(page, {})})
    if page in PAGE_KEY_FAMILIES:
        keys.append("at_t_num_buckets")   # a name of the family (a parameter of the toy T5 scheme)
    return keys + sorted(APP_KEYS)        # lecture mode's keys and Streamlit's, which every page reads


def pages() -> list[str]:
    """Every page: the registry's, and Lecture mode (which reads only lecture mode's keys)."""
    from relviz.app.link_schema import LINK_ONLY_PARAMS, PAGE_PARAMS

    return [*PAGE_PARAMS, *LINK_ONLY_PARAMS, "tour"]


def schema_takes(page: str, key: str, value: str | list[str]) -> bool:
    """Whether the registry accepts ``value`` for ``key`` on ``page`` (the last of repeated values)."""
    from relviz.app.link_schema import LINK_ONLY_PARAMS, BoolParam, page_param

    param = page_param(page, key) or LINK_ONLY_PARAMS.get(page, {}).get(key)
    if param is None:
        return False
    if isinstance(value, list) and not param.takes_list and len(value) > 1:
        return False         # a one-value control's key given more than once: refused whatever the values
    text = value[-1] if isinstance(value, list) and not param.takes_list else value
    if param.takes_list and text == "":
        return True          # an empty list: a multiselect the visitor cleared
    if isinstance(param, BoolParam) and isinstance(text, str) and text.lower() in ("true", "false"):
        return True          # Streamlit reads a checkbox's link value whatever its case
    try:
        param.check(key, [text] if param.takes_list and isinstance(text, str) else text)
    except ValueError:
        return False
    return True


def bound_values(at: AppTest) -> dict[str, object]:
    """query key -> the value of the control bound to it, for every URL-bound control on screen."""
    found = {}
    for root in (at.main, at.sidebar):
        for node in root:
            if isinstance(node, Widget) and getattr(node.proto, "query_param_key", ""):
                found[node.proto.query_param_key] = node.value
            elif isinstance(node, Block) and getattr(node, "type", "") == "tab_container":
                key = node.proto.tab_container.query_param_key
                if key:
                    found[key] = "tabs"
    return found


def texts(at: AppTest) -> list[str]:
    """Every text the page shows (markdown, captions, notices, errors), as sent."""
    out = []
    for root in (at.main, at.sidebar):
        for node in root:
            value = getattr(node, "value", None)
            if isinstance(value, str) and getattr(node, "type", "") in (
                    "markdown", "caption", "alert", "error", "warning", "info", "success", "exception", "text"):
                out.append(value)
    return out


def notices(at: AppTest) -> list[str]:
    return [e.value for e in [*at.warning, *at.error]]


def open_page(page: str, params: dict[str, str | list[str]], timeout: float = 120) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=timeout)
    at.switch_page(f"pages/{page}.py")
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def _markup_rendered(notice: str) -> list[str]:
    """Pieces of markdown a notice would render from a link's text: a link, a colour or icon directive, a formula."""
    plain = re.sub(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", "", notice, flags=re.S)   # code spans show their text as is
    return [m for pattern in (r"\]\((?:https?|javascript|file):", r":red\[", r":material/home:", r"\$x\^2\$")
            for m in re.findall(pattern, plain)]


def problems(page: str, params: dict[str, str | list[str]], at: AppTest, defaults: dict[str, object]) -> list[str]:
    """What is wrong with the page ``at`` opened from a link with ``params`` (``defaults``: its controls' values
    with no link)."""
    found = [f"exception: {e.value[:200]}" for e in at.exception]
    found += [f"traceback text: {t[:120]!r}" for t in texts(at) if _TRACE.search(t)]
    said = notices(at)
    for notice in said:
        if "Ignored in the link" in notice or "link" in notice:
            found += [f"markup from the link rendered: {m!r} in {notice[:160]!r}" for m in _markup_rendered(notice)]
    shown = bound_values(at)
    from relviz.app.link_schema import APP_KEYS, LINK_ONLY_PARAMS, page_param

    for key, value in params.items():
        if key not in APP_KEYS and page_param(page, key) is None and key not in LINK_ONLY_PARAMS.get(page, {}) \
                and not any(key[:40] in notice for notice in said):
            found.append(f"{key[:40]}: another page's key or none, and no notice names it")
        if key not in defaults or schema_takes(page, key, value):
            continue     # not a control of this page, or a value its control may take
        if shown.get(key) == value and (at.error or isinstance(value, str) and schema_takes(page, key, value.strip())):
            continue     # a text box took the text as typed: the page refused it with an error, or reads it trimmed
        if shown.get(key) != defaults[key]:
            found.append(f"{key}={str(value)[:30]!r}: the control shows {shown.get(key)!r}, not its default "
                         f"{defaults[key]!r}")
        if not any(key in notice for notice in said):
            found.append(f"{key}={str(value)[:30]!r}: no notice names {key}")
    return found


def cases(page: str, rng: random.Random, *, every: bool) -> list[dict[str, str | list[str]]]:
    """Links for ``page``: each hostile value for every key at once (or ``every`` False: one, seeded), one link
    with repeated keys (a valid value then a hostile one, and back), and one with another page's keys."""
    keys = page_keys(page)
    values = HOSTILE if every else rng.sample(HOSTILE, 1)
    links = [{key: value for key in keys} for value in values]
    links.append({key: [rng.choice(HOSTILE), "1"] if i % 2 else ["1", rng.choice(HOSTILE)]
                  for i, key in enumerate(keys)})
    others = [k for p in pages() if p != page for k in page_keys(p)]
    links.append({key: "3" for key in rng.sample(others, 6)} | {"nonsense_key": "1", "x" * 200: "y"})
    return links


def sweep(page_names: list[str], *, every: bool = True, seed: int = 0, log=print) -> list[str]:
    """Open every case of every page; returns the problems found, each with its page and link."""
    rng = random.Random(seed)
    out = []
    for page in page_names:
        defaults = bound_values(open_page(page, {}))
        for params in cases(page, rng, every=every):
            at = open_page(page, params)
            found = problems(page, params, at, defaults)
            short = {k[:20]: (v if isinstance(v, list) else str(v))[:2] if isinstance(v, list) else str(v)[:16]
                     for k, v in list(params.items())[:3]}
            log(f"{'!!' if found else '  '} {page} {short} {found[:3]}")
            out += [f"{page} {short}: {p}" for p in found]
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    chosen = next((a.split("=", 1)[1].split(",") for a in sys.argv[1:] if a.startswith("--pages=")), None)
    found = sweep(chosen or pages())
    print(f"{len(found)} problems")
    print("\n".join(found))
