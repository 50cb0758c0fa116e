"""The canvas components' shared prelude (relviz/components/canvas_common.js): each component's module is the prelude
then its own file, and no file declares a top-level name the prelude declares (in one module that is a SyntaxError,
which only a browser would show: the component would draw nothing)."""
from __future__ import annotations

import re

import pytest

from relviz.components import HERE, grid_canvas_js, step_canvas_js, toeplitz_canvas_js, xy_canvas_js

SERVED = {"toeplitz_canvas.js": toeplitz_canvas_js, "xy_canvas.js": xy_canvas_js, "grid_canvas.js": grid_canvas_js,
          "step_canvas.js": step_canvas_js}
TOP_LEVEL = re.compile(r"^(?:function\s+(\w+)|(?:const|let|var)\s+(\w+))", re.MULTILINE)


def top_level_names(text: str) -> set[str]:
    return {a or b for a, b in TOP_LEVEL.findall(text)}


def test_the_prelude_declares_the_shared_helpers():
    names = top_level_names((HERE / "canvas_common.js").read_text(encoding="utf-8"))
    assert {"FONT", "STATES", "canvasFrame", "downloadPng", "showTip", "announceDrawn", "received"} <= names


@pytest.mark.parametrize("file_name", sorted(SERVED))
def test_a_component_is_served_as_the_prelude_then_its_own_file(file_name):
    common = (HERE / "canvas_common.js").read_text(encoding="utf-8")
    own = (HERE / file_name).read_text(encoding="utf-8")
    assert SERVED[file_name]() == common + "\n" + own
    clash = top_level_names(common) & top_level_names(own)
    assert not clash, f"{file_name} declares again what canvas_common.js declares: {sorted(clash)}"
    assert own.count("export default function") == 1
