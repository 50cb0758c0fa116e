"""Limits on training inside the app, so that one user cannot exhaust a shared machine.

Three layers, each with a clear message when it stops a request:

1. **Caps on one run** (:class:`TrainingCaps`, checked by :func:`check_request`): model
   size (layers, heads, width, parameters), steps, training length, and a work budget
   steps × length × layers (≈ proportional to the run's CPU time; summed over the models of an
   experiment's live cell), plus a wall-clock limit enforced while training.
2. **A process-wide gate** (:class:`TrainingGate`): at most ``max_concurrent`` trainings at
   once on the whole server. It never waits: a request that finds every slot taken is
   refused at once ("another training is running, try again in a moment").
3. **A per-visitor quota** (:class:`RunLedger`, process-wide): how many runs one visitor may
   start per time window — keyed by the client as the app sees it (its IP address; see
   ``relviz.app.quotas.visitor_key``), so a reload or a new tab does not reset it — and how many runs
   the whole server starts per window (a backstop for visitors who change address).
   A client address has its own, larger budget (a class behind one NAT shares it).
   :class:`SessionTrainings` keeps a tab's trained models (the oldest is dropped) and asks the
   ledger before each run.

Training runs on one CPU thread (:func:`single_thread`): the small model trains faster that
way, and the server's other core stays free for everyone else's pages.

No Streamlit here: the page keeps a :class:`SessionTrainings` in ``st.session_state`` and
calls :func:`run_training` with a progress callback.
"""
from __future__ import annotations

import contextlib
import math
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from relviz.model import ModelConfig
from relviz.schemes import Param, Scheme, get_scheme
from relviz.app.training_caps import CAPS, TrainingCaps
from relviz.tasks import TASKS, Task, make_task
from relviz.training.loop import TrainProgress, TrainResult, train

__all__ = [
    "TrainingCaps", "CAPS", "TrainingRequest", "CapExceeded", "TrainingBusy", "TrainingTimeout",
    "check_request", "scheme_caps", "parameter_count", "TrainingGate", "GATE", "single_thread", "TrainedModel",
    "SessionTrainings", "RunLedger", "LEDGER",
    "run_training", "train_request", "guarded_run", "check_work",
]




class CapExceeded(ValueError):
    """The request is larger than the caps allow (the message says which cap and by how much)."""


class TrainingBusy(RuntimeError):
    """Every training slot on the server is taken: try again in a moment."""


class TrainingTimeout(RuntimeError):
    """The run took longer than ``max_seconds`` and was stopped."""


@dataclass(frozen=True)
class TrainingRequest:
    """What the page's "train your own" controls ask for. ``scheme_params``: the scheme's own
    parameters (relviz.schemes); a missing one takes the scheme's default."""

    scheme: str = "t5"
    task: str = "shift"
    task_params: dict[str, int] = field(default_factory=lambda: {"s": 5})
    n_layers: int = 2
    n_heads: int = 4
    steps: int = 300
    length: int = 24
    seed: int = 0
    scheme_params: dict[str, int | float] = field(default_factory=dict)

    @property
    def work(self) -> int:
        return int(self.steps) * int(self.length) * int(self.n_layers)

    def scheme_values(self) -> dict[str, int | float]:
        """Every parameter of the scheme: the requested value, else the scheme's default."""
        return {p.name: self.scheme_params.get(p.name, p.default) for p in get_scheme(self.scheme).params}

    def describe(self) -> str:
        cls = get_scheme(self.scheme)
        scheme = self.scheme + (f" ({cls.describe_params(self.scheme_values())})" if cls.params else "")
        task_args = ", ".join(f"{k}={v}" for k, v in self.task_params.items())
        return (f"{scheme} · {self.task}({task_args}) · {self.n_layers} layer{'s' * (self.n_layers != 1)}, "
                f"{self.n_heads} head{'s' * (self.n_heads != 1)} · {self.steps} steps at length {self.length}")


def _cap(name: str, value: Any, lo: int | float, hi: int | float, kind: type = int) -> int | float:
    ok = isinstance(value, int) if kind is int else isinstance(value, (int, float)) and math.isfinite(value)
    if isinstance(value, bool) or not ok:
        raise CapExceeded(f"{name} must be {'an integer' if kind is int else 'a number'} from {lo} to {hi}; "
                          f"got {value!r}")
    if not lo <= value <= hi:
        raise CapExceeded(f"{name} must be from {lo} to {hi} for training in the app; got {value}")
    return value


def check_request(request: TrainingRequest, caps: TrainingCaps = CAPS) -> tuple[ModelConfig, Task]:
    """Validate a request against the caps; return the model config and task to train.

    Raises CapExceeded (a ValueError) naming the cap, or the library's ValueError for an
    invalid scheme/task setting (e.g. an invalid T5 combination).
    """
    if not isinstance(request, TrainingRequest):
        raise ValueError(f"request must be a TrainingRequest; got {type(request).__name__}")
    scheme = get_scheme(request.scheme)
    if request.task not in TASKS:
        raise ValueError(f"unknown task {request.task!r}; known tasks: {', '.join(TASKS)}")
    _cap("layers", request.n_layers, 1, caps.max_layers)
    _cap("heads", request.n_heads, 1, caps.max_heads)
    _cap("steps", request.steps, caps.min_steps, caps.max_steps)
    _cap("training length", request.length, caps.min_length, caps.max_length)
    _cap("seed", request.seed, 0, 2**31 - 1)
    for name, value in request.task_params.items():
        _cap(f"task parameter {name}", value, 0, caps.max_task_param)
    if caps.d_model % request.n_heads:
        raise CapExceeded(f"heads must divide d_model = {caps.d_model}; got {request.n_heads} heads")
    unknown = sorted(set(request.scheme_params) - {p.name for p in scheme.params})
    if unknown:
        raise ValueError(f"scheme {scheme.name} has no parameter {', '.join(unknown)}; its parameters: "
                         f"{', '.join(p.name for p in scheme.params) or 'none'}")
    values = request.scheme_values()
    for param in scheme_caps(scheme):
        _cap(param.name, values[param.name], *param.slider_range, kind=param.kind)
    if request.work > caps.max_work:
        raise CapExceeded(
            f"this run is too large for the app: steps × length × layers = {request.steps} × {request.length} × "
            f"{request.n_layers} = {request.work:,}, the cap is {caps.max_work:,} (about half a minute of one "
            "CPU core). Lower the steps, the training length or the layers.")
    config = ModelConfig(d_model=caps.d_model, n_layers=request.n_layers, n_heads=request.n_heads,
                         d_ff=4 * caps.d_model, scheme=request.scheme, **values)
    task = make_task(request.task, **request.task_params)
    scheme.check_length_for(config, request.length)
    try:
        task.check_length(request.length)
    except ValueError as error:
        if request.length >= task.min_length:
            raise
        # The form cannot bound the task's slider by the training length (a bound that moves resets a Streamlit
        # slider to its default without a word), so the refusal says which two controls to move.
        labels = " or ".join(slider.label.split(" (")[0] for slider in type(task).sliders())
        raise ValueError(f"{error}. Set the training length to at least {task.min_length}, or lower {labels}.") \
            from None
    parameters = parameter_count(config)
    if parameters > caps.max_parameters:
        raise CapExceeded(f"this model has {parameters:,} parameters; the app trains at most "
                          f"{caps.max_parameters:,}")
    return config, task


def scheme_caps(scheme: type[Scheme]) -> list[Param]:
    """The scheme's parameters the app lets a visitor set, each bounded by its declared app range
    (parameters without one keep their default in the app)."""
    return [param for param in scheme.params if param.in_app]


def parameter_count(config: ModelConfig) -> int:
    """Parameters of a model with this config, known without building it."""
    return config.num_parameters()


class TrainingGate:
    """At most ``slots`` trainings at once in this process; acquiring never waits."""

    def __init__(self, slots: int) -> None:
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots must be an integer >= 1; got {slots!r}")
        self.slots = slots
        self._semaphore = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self._running = 0

    @property
    def running(self) -> int:
        return self._running

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one slot for the block, or raise TrainingBusy at once if there is none."""
        if not self._semaphore.acquire(blocking=False):
            raise TrainingBusy(
                f"Another training is running on this server (at most {self.slots} at a time, to keep the "
                "app responsive for everyone): try again in a moment.")
        with self._lock:
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
            self._semaphore.release()


#: The gate every in-app training goes through.
GATE = TrainingGate(CAPS.max_concurrent)

_threads_lock = threading.Lock()
_threads_users = 0
_threads_before = 1


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Run torch on one intra-op thread inside the block; the previous setting comes back after.

    Reference-counted, so overlapping blocks (two gate slots) restore the setting only when
    the last one ends.
    """
    global _threads_users, _threads_before
    with _threads_lock:
        if _threads_users == 0:
            _threads_before = torch.get_num_threads()
        _threads_users += 1
        torch.set_num_threads(1)
    try:
        yield
    finally:
        with _threads_lock:
            _threads_users -= 1
            if _threads_users == 0:
                torch.set_num_threads(_threads_before)
            else:
                torch.set_num_threads(1)


@dataclass(frozen=True)
class TrainedModel:
    """A model trained in this session: what the picker lists and the page runs."""

    key: str                  # unique in the process ("yours-<hex>"), for caches
    name: str                 # shown in the picker, unique in the session
    request: TrainingRequest
    result: TrainResult

    @property
    def model(self):
        return self.result.model

    @property
    def task(self) -> Task:
        return self.result.task

    @property
    def scheme(self) -> str:
        return self.result.model.config.scheme

    @property
    def accuracy(self) -> float:
        return self.result.accuracy

    @property
    def train_length(self) -> int:
        return self.result.length


class RunLedger:
    """Runs started per visitor and on the whole server, over a sliding window (process-wide).

    A visitor is an opaque key (relviz.app.quotas.visitor_key: a hash of the client address). Each run
    counts against its visitor and against the server for ``caps.quota_window_s`` seconds. At
    most ``max_visitors`` keys are remembered (the least recently active are forgotten first);
    the server-wide budget still holds for them. Thread-safe: every session's script thread asks.
    """

    def __init__(self, caps: TrainingCaps = CAPS, *, clock: Callable[[], float] = time.monotonic,
                 max_visitors: int = 10_000) -> None:
        self.caps = caps
        self._clock = clock
        self._max_visitors = max_visitors
        self._lock = threading.Lock()
        self._visitors: OrderedDict[str, list[float]] = OrderedDict()
        self._server: list[float] = []

    def _prune(self, now: float) -> None:
        horizon = now - self.caps.quota_window_s
        self._server = [t for t in self._server if t > horizon]
        for key in list(self._visitors):
            kept = [t for t in self._visitors[key] if t > horizon]
            if kept:
                self._visitors[key] = kept
            else:
                del self._visitors[key]

    def used(self, visitor: str) -> int:
        with self._lock:
            self._prune(self._clock())
            return len(self._visitors.get(visitor, ()))

    def _budgets(self, visitor: str, address: str | None) -> list[tuple[list[float], int, str]]:
        """(runs in the window, limit, whose) for the visitor, its address and the server."""
        budgets = [(self._visitors.get(visitor, []), self.caps.max_trainings_per_session, "per visitor")]
        if address is not None:
            budgets.append((self._visitors.get(_ADDRESS + address, []), self.caps.max_trainings_per_address,
                            "per client address"))
        budgets.append((self._server, self.caps.max_trainings_per_server, "for the whole server"))
        return budgets

    def left(self, visitor: str, address: str | None = None) -> int:
        with self._lock:
            self._prune(self._clock())
            return max(0, min(limit - len(runs) for runs, limit, _ in self._budgets(visitor, address)))

    def _refusal(self, visitor: str, address: str | None, now: float) -> str | None:
        minutes = self.caps.quota_window_s / 60
        for runs, limit, whose in self._budgets(visitor, address):
            if len(runs) >= limit:
                wait = runs[0] + self.caps.quota_window_s - now
                return (f"{len(runs)} runs were started in the last {minutes:.0f} minutes, the limit {whose} is "
                        f"{limit} (reloading the page does not reset it): the next run is possible in "
                        f"{max(1, round(wait / 60))} min.")
        return None

    def _refuse_now(self, visitor: str, address: str | None) -> float:
        """Prune, then raise CapExceeded if ``visitor`` may not start a run; the time checked. Hold the lock."""
        now = self._clock()
        self._prune(now)
        refusal = self._refusal(visitor, address, now)
        if refusal:
            raise CapExceeded(refusal)
        return now

    def check(self, visitor: str, address: str | None = None) -> None:
        """Raise CapExceeded (saying when the next run is possible) if ``visitor`` may not start a run."""
        with self._lock:
            self._refuse_now(visitor, address)

    def record(self, visitor: str, address: str | None = None) -> None:
        """Count a run for ``visitor``, its address and the server, or raise CapExceeded (atomically)."""
        with self._lock:
            now = self._refuse_now(visitor, address)
            for key in [visitor] + ([_ADDRESS + address] if address is not None else []):
                self._visitors.setdefault(key, []).append(now)
                self._visitors.move_to_end(key)
            self._server.append(now)
            while len(self._visitors) > self._max_visitors:
                self._visitors.popitem(last=False)


_ADDRESS = "address:"


#: The ledger every app session shares (one per server process).
LEDGER = RunLedger()


class SessionTrainings:
    """One browser session's trained models (newest last) and how many runs it has started."""

    def __init__(self, caps: TrainingCaps = CAPS, *, visitor: str | None = None, address: str | None = None,
                 ledger: RunLedger | None = None) -> None:
        """``visitor``: the key the runs count against across reloads (relviz.app.quotas.visitor_key); None
        counts them for this session alone. ``address``: the client's (hashed) address, whose
        budget every visitor behind it shares. ``ledger``: where they are counted (a private one
        when None, so library users and tests do not share the server's budget)."""
        self.caps = caps
        self.models: OrderedDict[str, TrainedModel] = OrderedDict()
        self.started = 0
        self._counter = 0
        self.dropped: list[str] = []
        self.visitor = visitor if visitor is not None else f"session-{uuid.uuid4().hex}"
        self.address = address
        self.ledger = ledger if ledger is not None else RunLedger(caps)

    @property
    def runs_left(self) -> int:
        return max(0, min(self.caps.max_trainings_per_session - self.started, self.ledger.left(self.visitor, self.address)))

    def check_quota(self) -> None:
        if self.started >= self.caps.max_trainings_per_session:
            raise CapExceeded(
                f"this session has started {self.started} trainings, the limit per session (and per visitor, "
                f"across reloads) is {self.caps.max_trainings_per_session} per "
                f"{self.caps.quota_window_s / 60:.0f} minutes.")
        self.ledger.check(self.visitor, self.address)

    def start(self) -> None:
        """Count a run (even one that later fails or is interrupted) for the session and the visitor."""
        self.check_quota()
        self.ledger.record(self.visitor, self.address)
        self.started += 1

    def add(self, request: TrainingRequest, result: TrainResult) -> TrainedModel:
        """Keep a finished model; beyond max_models_per_session the oldest is dropped (see .dropped)."""
        self._counter += 1
        task = result.task.describe()
        name = f"yours-{self._counter}: {result.model.config.scheme}, {task}"
        trained = TrainedModel(key=f"yours-{uuid.uuid4().hex}", name=name, request=request, result=result)
        self.models[name] = trained
        self.dropped = []
        while len(self.models) > self.caps.max_models_per_session:
            old, _ = self.models.popitem(last=False)
            self.dropped.append(old)
        return trained

    def get(self, name: str) -> TrainedModel | None:
        return self.models.get(name)

    def names(self) -> list[str]:
        return list(self.models)


def run_training(request: TrainingRequest, session: SessionTrainings, *,
                 progress: Callable[[TrainProgress], Any] | None = None,
                 gate: TrainingGate = GATE, caps: TrainingCaps = CAPS) -> TrainedModel:
    """Check the request and the quotas, train on one thread inside a gate slot, keep the model.

    Raises CapExceeded / ValueError (bad or too large request, session quota), TrainingBusy
    (no free slot: nothing was started) or TrainingTimeout. Anything ``progress`` raises (the
    app's rerun when the user moves a control) stops the run and frees the slot.
    """
    config, task = check_request(request, caps)

    with guarded_run(session, gate=gate, caps=caps) as check_time:
        def report(update: TrainProgress) -> None:
            check_time(f"at step {update.step} of {update.steps}")
            if progress is not None:
                progress(update)

        result = _train_checked(request, config, task, report)
    return session.add(request, result)


def train_request(request: TrainingRequest, progress: Callable[[TrainProgress], Any] | None = None, *,
                  caps: TrainingCaps = CAPS) -> TrainResult:
    """Check the request against the caps and train it, on the CPU, with no guard: call it inside
    :func:`guarded_run` (as the app's ``quotas.run_guarded`` does; :func:`run_training` checks before taking
    its slot and trains the checked pair)."""
    config, task = check_request(request, caps)
    return _train_checked(request, config, task, progress)


def _train_checked(request: TrainingRequest, config: ModelConfig, task: Task,
                   progress: Callable[[TrainProgress], Any] | None) -> TrainResult:
    """Train ``request`` with the (config, task) :func:`check_request` returned for it, on the CPU."""
    return train(config, task, steps=request.steps, length=request.length, seed=request.seed,
                 progress=progress, device="cpu")


@contextlib.contextmanager
def guarded_run(session: SessionTrainings, *, gate: TrainingGate = GATE,
                caps: TrainingCaps = CAPS) -> Iterator[Callable[[str], None]]:
    """The frame of every in-app run (training a model, an experiment's live cell, a measurement):
    the session's quota, a server-wide slot, one torch thread, and a wall-clock limit.

    Yields ``check_time(where)``: call it from the run's progress callback; it raises
    TrainingTimeout once ``caps.max_seconds`` have passed. The slot is freed however the block ends.
    """
    session.check_quota()
    with gate.slot():
        session.start()
        start = time.perf_counter()

        def check_time(where: str = "") -> None:
            if time.perf_counter() - start > caps.max_seconds:
                raise TrainingTimeout(
                    f"stopped after {caps.max_seconds:.0f} s{' ' + where if where else ''} (the server is busy): "
                    "try fewer steps or a smaller setting.")

        with single_thread():
            yield check_time


def check_work(work: int, what: str, caps: TrainingCaps = CAPS) -> int:
    """Refuse a live experiment cell whose total work (Σ steps × length × layers over the models
    it trains) is over ``caps.max_cell_work``; the message says by how much and what to lower."""
    if work > caps.max_cell_work:
        raise CapExceeded(
            f"{what} is too large for the app: steps × length × layers summed over its models = {work:,}, the "
            f"cap is {caps.max_cell_work:,} (about two minutes of one CPU core). Lower the steps.")
    return work


def steps_within_cap(work_per_step: int, most: int, step: int, caps: TrainingCaps = CAPS) -> int:
    """The largest step count (a multiple of ``step``, at most ``most``, at least ``step``) whose work fits
    ``caps.max_cell_work``, so a slider's range holds only live cells :func:`check_work` accepts."""
    fits = caps.max_cell_work // max(1, work_per_step) // step * step
    return max(step, min(most, fits))
