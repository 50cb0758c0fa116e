"""The worst case of relviz's Streamlit caches: each cache's largest entry times its max_entries.

Every page runs once at its heaviest settings (tests/load_support.py: HEAVIEST, as a shared link
sets them; AppTest, one process, no server) and once at its defaults. After each page, every entry
its caches hold is sized the way Streamlit's /_stcore/metrics sizes it: an st.cache_data entry by
its pickled bytes (what it holds in memory; server.maxCacheDataSize caps their sum), an
st.cache_resource entry by pympler's asizeof (server.enableExpensiveMemoryStats). A cache's bound
is its max_entries (read by tests/test_cache_bounds.py's scan) times its largest entry seen. A
cache no run reached is listed as not measured; the largest entry assumes the heaviest settings
make the largest entries (the longest matrices, the largest windows, the most heads and tokens).

Run: python tests/cache_sizes.py   (writes test-artifacts/cache_sizes.json, prints the table)
"""
from __future__ import annotations

import json
import sys
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import streamlit as st  # noqa: E402
from streamlit import config  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from load_support import HEAVIEST  # noqa: E402
from relviz.app.internals import cache_entry_sizes  # noqa: E402
from test_cache_bounds import scan  # noqa: E402

REPO = HERE.parent
ARTIFACT = REPO / "test-artifacts" / "cache_sizes.json"
#: server.maxCacheDataSize in .streamlit/config.toml: all st.cache_data entries together.
CACHE_DATA_BUDGET_MB = 256


def measure(pages: list[str] | None = None) -> dict:
    from relviz.app.navigation import PAGES

    config.set_option("server.enableExpensiveMemoryStats", True)
    names = pages or [Path(info.path).stem for info in PAGES]
    rows = []
    for name in names:
        path = REPO / "pages" / f"{name}.py"
        bounds = {(c.kind, c.function): c.max_entries for c in scan(path)}
        largest: dict[tuple[str, str], int] = {}
        seconds = {}
        for label, query in (("heaviest", HEAVIEST.get(name, "")), ("default", "")):
            at = AppTest.from_file(str(REPO / "app.py"), default_timeout=600)
            at.switch_page(f"pages/{name}.py")
            for key, values in urllib.parse.parse_qs(query).items():
                at.query_params[key] = values[-1]
            started = time.perf_counter()
            at.run()
            seconds[label] = round(time.perf_counter() - started, 1)
            if at.exception:
                raise RuntimeError(f"{name} ({label}): {[e.value for e in at.exception]}")
            for key, sizes in cache_entry_sizes().items():
                largest[key] = max(largest.get(key, 0), *sizes)
            st.cache_data.clear()
            st.cache_resource.clear()
        for key, max_entries in sorted(bounds.items()):
            biggest = largest.get(key)
            rows.append({"page": name, "kind": key[0], "function": key[1], "max_entries": max_entries,
                         "largest_entry_mb": None if biggest is None else round(biggest / 2**20, 3),
                         "bound_mb": None if biggest is None else round(max_entries * biggest / 2**20, 1)})
        print(f"{name}: {seconds}", flush=True)
    data_bound = sum(r["bound_mb"] or 0 for r in rows if r["kind"] == "cache_data")
    resource_bound = sum(r["bound_mb"] or 0 for r in rows if r["kind"] == "cache_resource")
    return {
        "rows": rows,
        "cache_data_bound_mb": round(min(data_bound, CACHE_DATA_BUDGET_MB), 1),
        "cache_data_sum_of_bounds_mb": round(data_bound, 1),
        "cache_resource_bound_mb": round(resource_bound, 1),
        "not_measured": [f"{r['page']}.{r['function']}" for r in rows if r["largest_entry_mb"] is None],
    }


if __name__ == "__main__":
    result = measure(sys.argv[1:] or None)
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for row in sorted(result["rows"], key=lambda r: -(r["bound_mb"] or 0)):
        print(f"{row['page']:12} {row['kind']:15} {row['function']:24} x{row['max_entries']:<4} "
              f"largest {row['largest_entry_mb']} MB -> {row['bound_mb']} MB")
    print(f"st.cache_data: sum of bounds {result['cache_data_sum_of_bounds_mb']} MB, held at most "
          f"{result['cache_data_bound_mb']} MB (server.maxCacheDataSize); st.cache_resource: at most "
          f"{result['cache_resource_bound_mb']} MB; not measured: {result['not_measured']}")
