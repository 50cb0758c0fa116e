"""Tests for relviz.tasks: targets against naive loops, seeding, parse/render."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from relviz.tasks import (
    DIGITS,
    TASKS,
    Absolute,
    Shift,
    WindowMax,
    accuracy,
    make_task,
    parse_text,
    render_tokens,
    task_from_dict,
    task_param_specs,
)


# ---- naive references, one loop per definition ----------------------------------------

def naive(task, seq: list[int]) -> tuple[list[int], list[bool]]:
    targets, mask = [], []
    for i in range(len(seq)):
        if isinstance(task, Shift):
            ok = i >= task.s
            targets.append(seq[i - task.s] if ok else 0)
        elif isinstance(task, WindowMax):
            ok = i >= task.w - 1
            targets.append(max(seq[i - task.w + 1: i + 1]) if ok else 0)
        elif isinstance(task, Absolute):
            ok = i >= task.p
            targets.append(seq[task.p] if ok else 0)
        else:
            raise AssertionError(task)
        mask.append(ok)
    return targets, mask


TASK_CASES = [Shift(1), Shift(5), Shift(9), WindowMax(1), WindowMax(3), WindowMax(6),
              Absolute(0), Absolute(3), Absolute(7)]


@pytest.mark.parametrize("task", TASK_CASES, ids=lambda t: t.describe())
@pytest.mark.parametrize("length", [1, 3, 8, 10, 17])
def test_targets_match_naive_loop(task, length):
    gen = torch.Generator().manual_seed(length)
    inputs = torch.randint(0, 10, (4, length), generator=gen)
    targets, mask = task.targets(inputs)
    assert targets.dtype == torch.long and mask.dtype == torch.bool
    for row in range(4):
        want_t, want_m = naive(task, inputs[row].tolist())
        assert mask[row].tolist() == want_m
        assert targets[row].tolist() == want_t


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(TASKS)), st.integers(1, 8),
       st.lists(st.integers(0, 9), min_size=1, max_size=30))
def test_targets_property(name, param, seq):
    field = task_param_specs(name)[0][0]
    task = make_task(name, **{field: param})
    targets, mask = task.targets(torch.tensor(seq))
    want_t, want_m = naive(task, seq)
    assert targets.tolist() == want_t and mask.tolist() == want_m


@pytest.mark.parametrize("name", sorted(TASKS))
def test_sample_shapes_and_determinism(name):
    task = make_task(name)
    a = task.sample(8, 20, torch.Generator().manual_seed(3))
    b = task.sample(8, 20, torch.Generator().manual_seed(3))
    c = task.sample(8, 20, torch.Generator().manual_seed(4))
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    assert not torch.equal(a.inputs, c.inputs)
    inputs, targets, mask = a
    assert inputs.shape == targets.shape == mask.shape == (8, 20)
    assert inputs.dtype == targets.dtype == torch.long and mask.dtype == torch.bool
    assert int(inputs.min()) >= 0 and int(inputs.max()) < task.vocab_size
    assert mask[:, : task.first_counted].sum() == 0 and mask[:, task.first_counted:].all()
    assert torch.equal(targets, task.targets(inputs)[0])


def test_shift_answer_sits_at_offset_minus_s():
    task = Shift(5)
    inputs, targets, mask = task.sample(4, 16, torch.Generator().manual_seed(0))
    assert torch.equal(targets[:, 5:], inputs[:, :-5])
    assert not mask[:, :5].any()


def test_sample_refuses_too_short_lengths_and_bad_arguments():
    with pytest.raises(ValueError, match=r"length must be at least 6 for shift\(s=5\): positions before 5 "
                                         r"have no answer; got 5"):
        Shift(5).sample(2, 5, torch.Generator())
    with pytest.raises(ValueError, match="batch"):
        Shift(5).sample(0, 10, torch.Generator())
    with pytest.raises(ValueError, match="generator"):
        Shift(5).sample(2, 10, 0)


def test_registry_and_params():
    assert set(TASKS) >= {"shift", "window_max", "absolute"}
    assert make_task("shift", s=3) == Shift(3)
    assert task_from_dict(Shift(3).to_dict()) == Shift(3)
    assert task_from_dict(WindowMax(4).to_dict()) == WindowMax(4)
    assert Shift().describe() == "shift(s=5)"
    with pytest.raises(ValueError, match="unknown task 'reverse'; known tasks: shift"):
        make_task("reverse")
    with pytest.raises(ValueError, match="has no parameter w; its parameters: s"):
        make_task("shift", w=3)
    with pytest.raises(ValueError, match="shift s must be an integer"):
        make_task("shift", s=0)
    with pytest.raises(ValueError, match="task must be an object"):
        task_from_dict(["shift"])


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet=DIGITS, min_size=1, max_size=50))
def test_parse_render_round_trip(text):
    tokens = parse_text(text)
    assert tokens.dtype == torch.long and tokens.shape == (len(text),)
    assert render_tokens(tokens) == text
    assert render_tokens(tokens.tolist()) == text


def test_parse_names_bad_characters():
    with pytest.raises(ValueError, match=r"only the characters '0123456789' are allowed; found 'a' at "
                                         r"position 2, ' ' at position 3"):
        parse_text("12a 4")
    with pytest.raises(ValueError, match="empty"):
        parse_text("   ")
    assert parse_text(" 123\n").tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="tokens must be ids from 0 to 9"):
        render_tokens([1, 10])


def test_accuracy():
    targets = torch.tensor([[1, 2, 3, 4]])
    mask = torch.tensor([[False, True, True, True]])
    assert accuracy(torch.tensor([[0, 2, 3, 0]]), targets, mask) == pytest.approx(2 / 3)
    logits = torch.nn.functional.one_hot(torch.tensor([[9, 2, 3, 4]]), 10).float()
    assert Shift().accuracy(logits, targets, mask) == 1.0
    with pytest.raises(ValueError, match="no position counts"):
        accuracy(targets, targets, torch.zeros_like(mask))


def test_the_link_schema_takes_each_task_slider_over_its_range():
    """The tour link schema is torch-free, so it spells the task sliders out; they must be the tasks' own."""
    from relviz.app.link_schema import PAGE_PARAMS
    from relviz.tasks import TASKS

    params = PAGE_PARAMS["attention"]
    assert set(params["at_ttask"].choices) == set(TASKS)
    for cls in TASKS.values():
        for slider in cls.sliders():
            link = params[f"at_t{slider.field}"]
            assert (link.lo, link.hi) == (slider.minimum, slider.maximum), slider
            assert slider.minimum <= slider.default <= slider.maximum
