"""docs/example.ipynb runs top to bottom: the notebook API's story, executed by nbclient.

The kernel is this interpreter (a kernelspec written for the test, found through JUPYTER_PATH),
so the notebook sees the same relviz and the same pins as the tests; a cell that raises fails.
"""
from __future__ import annotations

import json
import sys

import nbformat
from nbclient import NotebookClient

from test_requirements import ROOT

NOTEBOOK = ROOT / "docs" / "example.ipynb"
KERNEL = "relviz-test-python"


def test_the_example_notebook_runs(tmp_path, monkeypatch):
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "relviz tests", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
        "commit the notebook without outputs (it is executed here)"
    NotebookClient(notebook, kernel_name=KERNEL, timeout=300,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()  # raises on a failing cell

    outputs = [cell.outputs for cell in notebook.cells if cell.cell_type == "code"]
    figures = sum("application/vnd.plotly.v1+json" in out.get("data", {}) for cell in outputs for out in cell)
    assert figures >= 10, f"expected the notebook to draw its figures, saw {figures}"
    # stdout only: kaleido's browser driver (choreographer) may log to stderr while it shuts down,
    # e.g. "JSONError decoding message. Ignoring" when its own "{bye}" sentinel arrives glued to
    # Chromium's last message; the export has succeeded by then, and a failing cell raises above.
    printed = "".join(out.get("text", "") for out in outputs[-1]
                      if out.get("output_type") == "stream" and out.get("name") == "stdout")
    assert printed.startswith("<svg"), f"the SVG export cell printed {printed!r}"
