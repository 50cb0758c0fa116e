"""The family table is typed: every key of an entry is one its reader interprets, with a value of the right
type, so a misspelt option ("layuot") is a ValueError naming it instead of a silent default."""
from __future__ import annotations

import inspect

import pytest

from relviz.mechanisms import MECHANISMS
from relviz.mechanisms import families
from relviz.mechanisms.families import FAMILIES, check_family
from relviz.model_plan import read_plan

COHERE = {"model_type": "cohere", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
          "rope_theta": 10000.0}


def test_every_entry_of_the_table_is_well_typed():
    for model_type, entry in FAMILIES.items():
        assert check_family(model_type, entry) is entry


def test_each_declared_option_is_read_by_its_mechanism():
    """No stale declaration: every option a mechanism declares appears in its module's source."""
    for name, mechanism in MECHANISMS.items():
        source = inspect.getsource(inspect.getmodule(mechanism))
        for key in mechanism.option_types:
            assert f'"{key}"' in source.replace(f'"{key}": ', "", 1), (name, key)


@pytest.mark.parametrize("change,named", [
    ({"mechanisms": {"rotation": {"layuot": "interleaved"}, "pattern": {}}}, "'layuot'"),
    ({"mechanisms": {"rotation": {"layout": "interleavd"}, "pattern": {}}}, "'layout' must be"),
    ({"mechanisms": {"rotation": {"layout": "interleaved"}, "patern": {}}}, "'patern'"),
    ({"mechanisms": {"rotation": {"theta": "10000"}, "pattern": {}}}, "'theta' must be float"),
    ({"mechanisms": {"rotation": {}, "pattern": {"window_is_width": 1}}}, "'window_is_width' must be bool"),
    ({"stakcs": {}}, "'stakcs'"),
    ({"refuse": {"reason": "x", "whne": {}}}, "'whne'"),
    ({"refuse": {"when": {"use_qk_norm": True}}}, "refuse must be"),
])
def test_a_misspelt_or_mistyped_key_is_a_value_error_naming_it(monkeypatch, change, named):
    entry = {**FAMILIES["cohere"], **change}
    monkeypatch.setitem(families.FAMILIES, "cohere", entry)
    with pytest.raises(ValueError, match=named):
        read_plan(COHERE)


def test_the_unchanged_entry_reads_its_layout():
    rotation = read_plan(COHERE).first(MECHANISMS["rotation"])
    assert rotation.layout == "interleaved"


def test_an_entry_refuses_a_config_saying_what_it_runs(monkeypatch):
    """An entry's ``refuse`` stops the reading where its ``when`` holds, with its reason; elsewhere it reads."""
    entry = {**FAMILIES["cohere"], "refuse": {"when": {"use_qk_norm": True}, "reason": "its q and k norms"}}
    monkeypatch.setitem(families.FAMILIES, "cohere", entry)
    with pytest.raises(ValueError, match="model_type 'cohere' is refused by relviz's family table: its q and k norms"):
        read_plan({**COHERE, "use_qk_norm": True})
    assert read_plan(COHERE).first(MECHANISMS["rotation"]).layout == "interleaved"
