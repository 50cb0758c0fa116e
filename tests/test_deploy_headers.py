"""docs/DEPLOY.md's proxy example: the framing and content policy headers, the metrics endpoint denied,
and a script hash that still matches the installed Streamlit's index.html."""
from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import streamlit

DEPLOY = (Path(__file__).resolve().parents[1] / "docs" / "DEPLOY.md").read_text()
NGINX = DEPLOY[DEPLOY.index("```nginx"):DEPLOY.index("```", DEPLOY.index("```nginx") + 3)]


def _inline_script_hashes() -> set[str]:
    html = (Path(streamlit.__file__).parent / "static" / "index.html").read_text()
    return {"sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
            for body in re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", html, re.S)}


def test_the_proxy_example_forbids_framing_and_sets_a_content_policy():
    assert 'add_header X-Frame-Options "DENY" always;' in NGINX
    (policy,) = re.findall(r'add_header Content-Security-Policy "([^"]+)" always;', NGINX)
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'"
    assert directives["default-src"] == "'self'" and directives["connect-src"] == "'self'"
    assert "'unsafe-inline'" not in directives["script-src"] and "'unsafe-eval'" not in directives["script-src"]
    hashes = set(re.findall(r"'(sha256-[^']+)'", directives["script-src"]))
    assert hashes == _inline_script_hashes(), (
        "Streamlit's inline script changed: update the hash in docs/DEPLOY.md (the command is there)")


def test_the_proxy_example_denies_the_metrics_endpoint():
    assert re.search(r"location = /relviz/_stcore/metrics \{ deny all; \}", NGINX)
