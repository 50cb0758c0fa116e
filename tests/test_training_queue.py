"""relviz.app.training_queue: caps on one run, the process-wide gate, per-session quotas, threads."""
from __future__ import annotations

import threading

import pytest
import torch

from relviz.app.training_queue import (
    CAPS,
    CapExceeded,
    RunLedger,
    SessionTrainings,
    TrainingBusy,
    TrainingCaps,
    TrainingGate,
    TrainingRequest,
    TrainingTimeout,
    check_request,
    check_work,
    guarded_run,
    parameter_count,
    run_training,
    single_thread,
)
from relviz.model import build_model

TINY = TrainingRequest(scheme="t5", n_layers=1, n_heads=2, steps=10, length=8, task_params={"s": 2})


def test_the_default_request_is_within_the_caps():
    config, task = check_request(TrainingRequest())
    assert config.scheme == "t5" and config.d_model == CAPS.d_model and task.describe() == "shift(s=5)"
    assert TrainingRequest().work <= CAPS.max_work


@pytest.mark.parametrize("changes, message", [
    ({"n_layers": CAPS.max_layers + 1}, "layers must be from 1"),
    ({"n_heads": CAPS.max_heads + 1}, "heads must be from 1"),
    ({"n_heads": 3}, "heads must divide d_model"),
    ({"steps": CAPS.max_steps + 1}, "steps must be from"),
    ({"length": CAPS.max_length + 1}, "training length must be from"),
    ({"steps": 800, "length": 48, "n_layers": 3}, "steps × length × layers = 800 × 48 × 3"),
    ({"scheme": "shaw", "scheme_params": {"clip": 33}}, "clip must be from 0 to 32 for training in the app"),
    ({"scheme": "t5", "scheme_params": {"num_buckets": 65}}, "num_buckets must be from 2 to 64 for training in the app"),
    ({"task_params": {"s": CAPS.max_task_param + 1}}, "task parameter s"),
    ({"steps": True}, "steps must be an integer"),
])
def test_caps_refuse_with_a_message_naming_the_cap(changes, message):
    request = TrainingRequest(**{**TrainingRequest().__dict__, **changes})
    with pytest.raises(CapExceeded, match=message):
        check_request(request)


def test_library_validation_still_applies():
    with pytest.raises(ValueError, match="max_distance must be greater than max_exact"):
        check_request(TrainingRequest(scheme_params={"num_buckets": 4, "max_distance": 2}))
    with pytest.raises(ValueError, match=r"positions 0..15 only \(max_len=16\); a sequence of length 24"):
        check_request(TrainingRequest(scheme="learned", scheme_params={"max_len": 16}, length=24))
    with pytest.raises(ValueError, match="scheme shaw has no parameter num_buckets; its parameters: clip"):
        check_request(TrainingRequest(scheme="shaw", scheme_params={"num_buckets": 4}))
    with pytest.raises(ValueError, match="length must be at least"):
        check_request(TrainingRequest(task="absolute", task_params={"p": 20}, length=16))
    with pytest.raises(ValueError, match="unknown scheme"):
        check_request(TrainingRequest(scheme="bogus"))


def test_parameter_cap():
    caps = TrainingCaps(max_parameters=1000)
    with pytest.raises(CapExceeded, match="parameters"):
        check_request(TrainingRequest(), caps)


def test_gate_refuses_at_once_when_full_and_frees_after_errors():
    gate = TrainingGate(1)
    with gate.slot():
        assert gate.running == 1
        with pytest.raises(TrainingBusy, match="try again in a moment"):
            with gate.slot():
                pass
    with pytest.raises(RuntimeError):
        with gate.slot():
            raise RuntimeError("boom")
    assert gate.running == 0
    with gate.slot():  # free again
        pass


def test_gate_with_two_slots_across_threads():
    gate = TrainingGate(2)
    inside = threading.Barrier(3)
    leave = threading.Event()
    results = []

    def hold():
        with gate.slot():
            inside.wait()
            leave.wait(5)
        results.append("done")

    threads = [threading.Thread(target=hold) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    with pytest.raises(TrainingBusy):
        with gate.slot():
            pass
    leave.set()
    for t in threads:
        t.join()
    assert results == ["done", "done"] and gate.running == 0
    with pytest.raises(ValueError):
        TrainingGate(0)


def test_single_thread_restores_the_setting_when_the_last_block_ends():
    before = torch.get_num_threads()
    with single_thread():
        assert torch.get_num_threads() == 1
        with single_thread():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_session_quota_and_model_limit():
    caps = TrainingCaps(max_models_per_session=2, max_trainings_per_session=3)
    session = SessionTrainings(caps)
    gate = TrainingGate(1)
    names = []
    for _ in range(3):
        names.append(run_training(TINY, session, gate=gate, caps=caps).name)
    assert session.names() == names[1:] and session.dropped == [names[0]]
    assert names[0].startswith("yours-1: t5, shift(s=2)")
    assert session.runs_left == 0
    with pytest.raises(CapExceeded, match="limit per session"):
        run_training(TINY, session, gate=gate, caps=caps)
    keys = {session.get(n).key for n in session.names()}
    assert len(keys) == 2


def test_run_training_reports_progress_and_uses_one_thread():
    session = SessionTrainings()
    seen = []
    threads = []

    def progress(p):
        seen.append(p.fraction)
        threads.append(torch.get_num_threads())

    trained = run_training(TINY, session, progress=progress, gate=TrainingGate(1))
    assert seen[-1] == 1.0 and set(threads) == {1}
    assert trained.model.config.n_layers == 1 and 0.0 <= trained.accuracy <= 1.0
    assert trained.train_length == 8 and trained.scheme == "t5"
    assert not any(p.requires_grad for p in trained.model.parameters())


def test_a_busy_gate_starts_nothing_and_a_timeout_frees_the_slot():
    session = SessionTrainings()
    gate = TrainingGate(1)
    with gate.slot():
        with pytest.raises(TrainingBusy):
            run_training(TINY, session, gate=gate)
    assert session.started == 0 and not session.names()
    with pytest.raises(TrainingTimeout, match="stopped after 0 s"):
        run_training(TINY, session, gate=gate, caps=TrainingCaps(max_seconds=0.0))
    assert gate.running == 0 and session.started == 1 and not session.names()


def test_an_interrupted_run_frees_the_slot():
    """The app's rerun exception comes out of the progress callback: the slot must come back."""
    gate = TrainingGate(1)

    class Rerun(Exception):
        pass

    def progress(p):
        raise Rerun()

    with pytest.raises(Rerun):
        run_training(TINY, SessionTrainings(), progress=progress, gate=gate)
    assert gate.running == 0


def test_guarded_run_counts_the_run_holds_the_slot_and_times_out():
    """The frame the Experiments page's live cells use: quota, one slot, one thread, a deadline."""
    caps = TrainingCaps(max_trainings_per_session=2, max_seconds=0.0)
    session, gate = SessionTrainings(caps), TrainingGate(1)
    with guarded_run(session, gate=gate, caps=caps) as check_time:
        assert gate.running == 1 and session.started == 1 and torch.get_num_threads() == 1
        with pytest.raises(TrainingBusy):
            with guarded_run(SessionTrainings(caps), gate=gate, caps=caps):
                pass  # pragma: no cover
        with pytest.raises(TrainingTimeout, match="stopped after 0 s at step 3"):
            check_time("at step 3")
    assert gate.running == 0
    with pytest.raises(TrainingTimeout):
        with guarded_run(session, gate=gate, caps=caps) as check_time:
            check_time()
    assert gate.running == 0 and session.started == 2
    with pytest.raises(CapExceeded, match="limit per session"):
        with guarded_run(session, gate=gate, caps=caps):
            pass  # pragma: no cover
    assert session.started == 2 and gate.running == 0


def test_check_work_refuses_a_cell_over_the_cap():
    caps = TrainingCaps(max_cell_work=1000)
    assert check_work(1000, "this cell", caps) == 1000
    with pytest.raises(CapExceeded, match=r"this cell is too large.*1,001.*1,000"):
        check_work(1001, "this cell", caps)


def test_parameter_count_is_the_built_models():
    config, _ = check_request(TrainingRequest(scheme="shaw", n_layers=3, scheme_params={"clip": 32}))
    assert parameter_count(config) == build_model(config).num_parameters()


# ---------------------------------------------------------------------------------------
# The quota per visitor, not per tab: a reload (a new SessionTrainings with the same visitor key)
# keeps the count; the address and the server have their own budgets; runs age out of the window.

class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _ledger(**caps):
    clock = FakeClock()
    return RunLedger(TrainingCaps(**caps), clock=clock), clock


def test_a_reload_does_not_reset_the_visitor_quota():
    ledger, clock = _ledger(max_trainings_per_session=3, quota_window_s=600)
    for _ in range(3):
        tab = SessionTrainings(ledger.caps, visitor="cookie:a", ledger=ledger)  # a reload: a new session
        tab.start()
    reloaded = SessionTrainings(ledger.caps, visitor="cookie:a", ledger=ledger)
    assert reloaded.started == 0 and reloaded.runs_left == 0
    with pytest.raises(CapExceeded, match=r"limit per visitor is 3 \(reloading the page does not reset it\): "
                                          r"the next run is possible in 10 min"):
        reloaded.start()
    other = SessionTrainings(ledger.caps, visitor="cookie:b", ledger=ledger)
    other.start()  # another visitor is not affected
    clock.now += 601  # the window slides: the first runs no longer count
    reloaded.start()
    assert ledger.used("cookie:a") == 1


def test_the_address_and_the_server_have_their_own_budgets():
    ledger, clock = _ledger(max_trainings_per_session=2, max_trainings_per_address=3, max_trainings_per_server=5,
                            quota_window_s=60)
    for visitor in ("cookie:1", "cookie:1", "cookie:2"):
        ledger.record(visitor, "nat")
    with pytest.raises(CapExceeded, match="limit per client address is 3"):
        ledger.record("cookie:3", "nat")  # a cleared cookie behind the same address
    ledger.record("cookie:4", "elsewhere")
    ledger.record("cookie:5", None)
    with pytest.raises(CapExceeded, match="limit for the whole server is 5"):
        ledger.record("cookie:6", "fresh")
    assert ledger.left("cookie:6", "fresh") == 0
    clock.now += 61
    assert ledger.left("cookie:6", "fresh") == 2


def test_the_ledger_counts_atomically_under_threads():
    import threading as _threading

    ledger, _ = _ledger(max_trainings_per_session=1000, max_trainings_per_server=50)
    refused = []

    def hammer(i: int) -> None:
        for _ in range(10):
            try:
                ledger.record(f"cookie:{i}")
            except CapExceeded:
                refused.append(i)

    threads = [_threading.Thread(target=hammer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(ledger.used(f"cookie:{i}") for i in range(8)) == 50 and len(refused) == 30


def test_the_ledger_forgets_the_least_recent_visitors_beyond_its_bound():
    ledger = RunLedger(TrainingCaps(max_trainings_per_server=10_000), max_visitors=3)
    for i in range(5):
        ledger.record(f"cookie:{i}")
    assert [ledger.used(f"cookie:{i}") for i in range(5)] == [0, 0, 1, 1, 1]


def test_the_app_counts_a_visitor_across_sessions(monkeypatch):
    """Through the app: two AppTest sessions with the same visitor key (a reload) share the count."""
    from streamlit.testing.v1 import AppTest

    from relviz.app import training_queue
    ledger = RunLedger(TrainingCaps(max_trainings_per_session=2))
    monkeypatch.setattr(training_queue, "LEDGER", ledger)
    script = ("from relviz.app import quotas\n"
              "quotas.visitor_key = lambda: ('cookie:same', 'addr')\n"
              "t = quotas.session_trainings()\n"
              "import streamlit as st\n"
              "st.write(f'left {t.runs_left}')\n"
              "if st.button('go'):\n"
              "    t.start()\n")
    for expected in ("left 2", "left 1"):
        at = AppTest.from_string(script).run()
        assert at.markdown[0].value == expected
        at.button[0].click().run()
    assert AppTest.from_string(script).run().markdown[0].value == "left 0"


def test_the_visitor_key_is_the_token_under_the_xsrf_cookie_mask():
    """Streamlit re-masks its XSRF cookie on every page load (2|mask|token xor mask|time): two loads of
    one browser give different cookies and the same token, so a reload keeps the visitor's key."""
    from relviz.app.internals import xsrf_token as _xsrf_token

    token = bytes(range(16))
    cookies = []
    for mask in (b"\x01\x02\x03\x04", b"\xff\x00\xaa\x55"):
        masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(token))
        cookies.append(f"2|{mask.hex()}|{masked.hex()}|1795465483")
    assert cookies[0] != cookies[1]
    assert _xsrf_token(cookies[0]) == _xsrf_token(cookies[1]) == token.hex()
    assert _xsrf_token("2|zz|yy|1") == "2|zz|yy|1" and _xsrf_token("plain") == "plain"


def test_steps_within_cap_is_the_largest_multiple_the_cap_accepts():
    from relviz.app.training_caps import TrainingCaps
    from relviz.app.training_queue import check_work, steps_within_cap
    caps = TrainingCaps(max_cell_work=1000)
    assert steps_within_cap(7, 400, 5, caps) == 140            # 1000 // 7 = 142 → 140, a multiple of 5
    check_work(140 * 7, "cell", caps)
    with pytest.raises(ValueError):
        check_work(145 * 7, "cell", caps)
    assert steps_within_cap(1, 60, 10, caps) == 60             # the slider's own top
    assert steps_within_cap(500, 400, 5, caps) == 5            # never below one step of the slider
    assert steps_within_cap(0, 30, 10, caps) == 30             # no work per step: the top
