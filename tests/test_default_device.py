"""No page relies on relviz's default device.

relviz's core functions compute on the default device unless given one: CUDA on a teacher's GPU laptop or a
researcher's CUDA box. The app draws numpy, so every page must ask for the CPU; one that forgot crashed there
(a CUDA tensor meets a CPU one, or .numpy()) while every test here passed on the CPU. This runs each page in
a fresh interpreter (no cache from another test can hide a computation) with the default device set to 'meta',
which holds no values: any tensor that silently went to the default device fails the run.
"""
from __future__ import annotations

import json
import subprocess
import sys

from page_support import REPO

SCRIPT = r"""
import json, sys
import torch
import relviz._checks
relviz._checks.default_device = lambda: torch.device("meta")
from streamlit import config
from streamlit.testing.v1 import AppTest
from relviz.app.navigation import PAGES

config.set_option("client.showErrorDetails", "full")   # the exception's own message, not the deployment's redaction


def problems(at):
    return [e.value for e in at.exception] + [e.value for e in at.error]


runs = {}
for page in PAGES:
    at = AppTest.from_file(sys.argv[1], default_timeout=120)
    at.switch_page(page.path)
    at.run()
    runs[page.path] = problems(at)
    # A page whose first run shows one of several views (a radio keyed *_view): every other view too.
    for radio in [r for r in at.radio if (r.key or "").endswith("_view")]:
        for option in radio.options[1:]:
            at.radio(key=radio.key).set_value(option).run()
            runs[f"{page.path} {radio.key}={option}"] = problems(at)
print(json.dumps({"default": str(relviz._checks.resolve_device(None)), "runs": runs}))
"""


def test_every_page_runs_with_a_default_device_that_holds_no_values():
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(REPO / "app.py")], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["default"] == "meta"
    from relviz.app.navigation import PAGES

    assert {run.split(" ")[0] for run in report["runs"]} == {page.path for page in PAGES}
    assert any(" im_view=" in run for run in report["runs"])          # the Images page's other views ran too
    failed = {run: found for run, found in report["runs"].items() if found}
    assert not failed, failed
