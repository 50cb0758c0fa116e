"""Make the README's pictures again: every page of the app, as a visitor sees it, in Debian's Chromium.

    .venv/bin/python scripts/readme_pictures.py [OUT_DIR]     (default: docs/screenshots)

Starts the app on loopback (tests/browser_support.py), opens each view in PICTURES at 1280 × 800 (a laptop; the
lecture views at a projector's 1280 × 720), waits for every chart to draw, and saves one PNG per view. The
README shows them; run this after a change to a page, then look at the pictures before committing them.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote_plus, urljoin

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from browser_support import CHROMIUM_ARGS, app_server, chromium_path, wait_for_app  # noqa: E402


def _ym(model: str, **params: str) -> str:
    return "your_model?" + "&".join(f"{k}={quote_plus(v)}" for k, v in {"ym_model": f"{model} (published config)",
                                                                        **params}.items())


@dataclass(frozen=True)
class Picture:
    name: str         # the PNG's file name, without .png
    path: str         # the view: a page and its link values
    caption: str      # what the README says under it
    click: str = ""   # a button to press first (its label)
    height: int = 800


#: The README's pictures, the first one leading it: Your model's layer strip of a model people know.
PICTURES = [
    Picture("your_model", _ym("Gemma 3 27B", ym_layer="5", ym_view="rotation"),
            "Your model: Gemma 3 27B layer by layer (five local layers, then a global one), layer 5's wavelengths"),
    Picture("your_model_llama4", _ym("Llama 4 Scout 17B-16E", ym_layer="3", ym_view="pattern"),
            "Your model: Llama 4 Scout, chunked RoPE layers and a NoPE layer every four"),
    Picture("home", "?home_q=2", "Start here: relative position j − i"),
    Picture("shaw", "shaw?sh_clip=3", "Relative index and Shaw et al.'s clipping"),
    Picture("t5", "t5", "T5 buckets"),
    Picture("skew", "skew?skew_L=6", "The Music Transformer's skew, step by step"),
    Picture("absolute", "absolute", "Absolute against relative: sinusoidal vectors, their dot products, j − i"),
    Picture("rope", "rope", "RoPE and its scalings"),
    Picture("images", "images", "Images and video: positions in 2-D and 3-D"),
    Picture("attention", "attention", "Live attention of a small trained transformer"),
    Picture("experiments", "experiments", "Experiments: offset resolution, extrapolation, memory"),
    Picture("check", "check", "Check my implementation: an example with a known mistake", click="load the example"),
    Picture("tour", "tour?tour_at=4", "Lecture mode: step 4 of the built-in tour on a 1280 × 720 projector",
            click="▶ Start presenting", height=720),
]


def take(out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with app_server() as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        for picture in PICTURES:
            page = browser.new_page(viewport={"width": 1280, "height": picture.height})
            page.goto(urljoin(base + "/", picture.path))
            wait_for_app(page)
            if picture.click:
                page.get_by_role("button", name=picture.click).first.click()
                page.wait_for_timeout(1500)
                wait_for_app(page)
            try:
                page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
            except Exception:  # noqa: BLE001 - a view without a chart (none today) is still pictured
                pass
            page.wait_for_timeout(4000)  # every chart finishes drawing
            target = out / f"{picture.name}.png"
            page.screenshot(path=str(target))
            written.append(target)
            print(target, flush=True)
            page.close()
        browser.close()
    return written


if __name__ == "__main__":
    take(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "screenshots")
