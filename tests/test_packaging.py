"""relviz as a package: pyproject.toml agrees with the pins and the code, and the wheel is whole.

- Every dependency range in pyproject.toml is satisfied by the exact pin the tests run with
  (requirements.txt for the library and the app, requirements-dev.txt for the extras and tools),
  and every pin of requirements.txt is a dependency of the package or of its ``app`` extra.
- The library (every module of relviz/ except the app tier, the package relviz/app/) imports
  only the base dependencies; an extra's package (``app``, ``hf``, ``export``, ``dev``) only inside
  a function, in try/except ImportError (the rule of tests/test_requirements.py).
  So ``pip install relviz`` without extras gives a working library and command line.
- The wheel built from this tree holds every file under relviz/ (code and data: checkpoints,
  stored results, whatever is added later) and the ``relviz`` console script.
- The command line finds its data relative to the package, not the working directory.
"""
from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import relviz
from test_requirements import ROOT, canonical, imports_of, read_requirements

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
#: relviz modules that belong to the app tier (may import the app extra at top level).
APP_TIER = "relviz/app/"  # the app's support package: the only one that imports streamlit


def _requirements(group: list[str]) -> list[Requirement]:
    return [r for r in map(Requirement, group) if canonical(r.name) != "relviz"]


def _extras() -> dict[str, list[Requirement]]:
    return {name: _requirements(group) for name, group in PROJECT["optional-dependencies"].items()}


def test_pins_satisfy_the_pyproject_ranges():
    runtime = read_requirements(ROOT / "requirements.txt")
    everything = read_requirements(ROOT / "requirements-dev.txt")
    groups = {"dependencies": _requirements(PROJECT["dependencies"])} | _extras()
    for group, requirements in groups.items():
        for req in requirements:
            pins = runtime if group in ("dependencies", "app") else everything
            name = canonical(req.name)
            where = "requirements.txt" if pins is runtime else "requirements-dev.txt"
            assert name in pins, f"{group}: {req} has no exact pin in {where} (untested range)"
            assert req.specifier.contains(pins[name], prereleases=True), \
                f"{group}: {where} pins {name}=={pins[name]}, outside pyproject's {req}"


def test_every_runtime_pin_is_a_package_dependency():
    declared = {canonical(r.name) for r in _requirements(PROJECT["dependencies"]) + _extras()["app"]}
    missing = set(read_requirements(ROOT / "requirements.txt")) - declared
    assert not missing, f"pinned in requirements.txt but not declared in pyproject.toml: {missing}"


def test_extras_are_the_documented_ones():
    extras = _extras()
    assert {"app", "hf", "dev"} <= set(extras)
    assert {canonical(r.name) for r in extras["hf"]} == {"transformers", "huggingface-hub", "tokenizers"}
    assert {canonical(r.name) for r in extras["app"]} >= {"streamlit"}


@functools.cache
def _packages_distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _distributions_of(top: str) -> set[str]:
    return {canonical(d) for d in _packages_distributions().get(top, [])}


def test_the_library_imports_only_base_dependencies():
    base = {canonical(r.name) for r in _requirements(PROJECT["dependencies"])}
    extra = {canonical(r.name) for group in _extras().values() for r in group}
    bad = []
    for path in sorted((ROOT / "relviz").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel.startswith(APP_TIER):
            continue
        for imp in imports_of(path):
            if imp.top in sys.stdlib_module_names or imp.top in {"relviz", "__future__"}:
                continue
            dists = _distributions_of(imp.top)
            if dists & base:
                continue
            where = f"{imp.file}:{imp.line}: import {imp.top}"
            if not dists & extra:
                bad.append(f"{where}: not a dependency of the package")
            elif not (imp.in_function and imp.guarded):
                bad.append(f"{where}: an extra's package; import it inside the function that needs "
                           "it, in try/except ImportError that raises a \"pip install ...\" message or skips the feature")
    assert bad == []


def test_only_the_app_tier_imports_the_app_modules():
    """relviz.app's modules import streamlit at top level: the library must not import it at top level."""
    for path in sorted((ROOT / "relviz").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel.startswith(APP_TIER):
            continue
        text = path.read_text()
        for imp in imports_of(path):
            if imp.top == "relviz" and not imp.in_function:
                line = text.splitlines()[imp.line - 1]
                assert "relviz.app" not in line, f"{rel}:{imp.line}: {line}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """Build the wheel from a copy of the tree (setuptools writes build/ beside the sources)."""
    src = tmp_path_factory.mktemp("src")
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copytree(ROOT / "relviz", src / "relviz", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    code = "import sys; from setuptools import build_meta as b; print(b.build_wheel(sys.argv[1]))"
    proc = subprocess.run([sys.executable, "-c", code, str(src / "dist")], cwd=src,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    name = proc.stdout.strip().splitlines()[-1]
    return zipfile.ZipFile(src / "dist" / name)


def test_the_wheel_holds_every_file_under_relviz(wheel):
    names = set(wheel.namelist())
    tree = {str(p.relative_to(ROOT)) for p in (ROOT / "relviz").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    assert any(n.startswith("relviz/checkpoints/") and n.endswith(".safetensors") for n in tree)
    assert tree - names == set(), "files under relviz/ that pip install would leave out"


def test_the_wheel_publishes_the_results_schema(wheel):
    """The results file's JSON Schema is package data: installed relviz validates with it, users read it."""
    from relviz.experiments.schema import SCHEMA_PATH

    name = str(SCHEMA_PATH.relative_to(ROOT))
    assert name == "relviz/experiments/results.schema.json"
    assert json.loads(wheel.read(name)) == json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    metadata = wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert "Requires-Dist: jsonschema<5,>=4.26.0" in metadata or "Requires-Dist: jsonschema>=4.26.0,<5" in metadata


def test_the_wheel_declares_the_console_script_and_version(wheel):
    info = next(n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt"))
    entry_points = wheel.read(info).decode()
    assert "[console_scripts]" in entry_points and "relviz = relviz.__main__:main" in entry_points
    metadata = wheel.read(info.replace("entry_points.txt", "METADATA")).decode()
    assert f"\nVersion: {relviz.__version__}\n" in metadata
    assert "Requires-Dist: torch~=2.13.0" in metadata
    assert "Provides-Extra: hf" in metadata


def test_version_flag(capsys):
    from relviz.__main__ import main
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"relviz {relviz.__version__}"


def test_the_command_line_finds_its_data_from_any_directory(tmp_path, monkeypatch, capsys):
    """From an empty directory: the shipped checkpoints and stored results are found.

    (.ci/run does the same with the installed console script, from outside the checkout.)"""
    from relviz.__main__ import main
    from relviz.experiments import load_results

    monkeypatch.chdir(tmp_path)
    assert main(["checkpoints", "--json"]) == 0
    listed = {row["name"] for row in json.loads(capsys.readouterr().out)}
    shipped = {p.stem for p in (ROOT / "relviz" / "checkpoints").glob("*.safetensors")}
    assert shipped and listed == shipped
    assert load_results()
    assert list(os.scandir(tmp_path)) == [], "the command line wrote into the working directory"


def test_bench_skips_the_app_section_without_a_checkout(monkeypatch, tmp_path):
    """Installed from a wheel there is no app.py: the section says so instead of a traceback."""
    from relviz.bench import app as bench_app
    from relviz.bench import report as bench_report
    monkeypatch.setattr(bench_app, "REPO", tmp_path)
    result = bench_app.app_section(bench_report.BenchContext(quick=True, log=lambda message: None))
    assert result.rows == [] and "source checkout" in result.notes[0]
    assert "source checkout" in bench_report.format_table(result)


def test_torch_stays_on_the_tested_minor_release():
    """A wider torch range lets pip pick a newer torch, and from the public index its CUDA build."""
    torch_req = next(r for r in _requirements(PROJECT["dependencies"]) if r.name == "torch")
    assert torch_req.specifier.contains("2.13.0") and torch_req.specifier.contains("2.13.0+cpu")
    assert not torch_req.specifier.contains("2.14.0")
