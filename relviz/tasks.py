"""Synthetic sequence tasks where position matters.

Each task turns a random string of digits into per-position targets and a mask of the
positions that count. They are small enough to train in seconds, and each one asks a
different question of a position scheme:

- ``shift`` (s): output the token s places back. The answer sits at exactly one relative
  offset (j − i = −s), so every relative scheme that can address that offset learns it.
- ``window_max`` (w): output the largest of the last w tokens. A local window: relative
  schemes only need to tell "near" from "far".
- ``absolute`` (p): output the token at absolute position p. Nothing about it is relative,
  so relative-only schemes have to find position p indirectly, and often cannot: an honest
  counter-example.

Tokens are characters of a printable alphabet (digits), so a user can type a sequence in
the app: :func:`parse_text` and :func:`render_tokens` convert between the two.

Sign convention everywhere: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import torch

from relviz._checks import check_int

__all__ = [
    "DIGITS",
    "Sample",
    "Task",
    "Shift",
    "WindowMax",
    "Absolute",
    "TASKS",
    "DEFAULT_TASK",
    "make_task",
    "task_from_dict",
    "task_param_specs",
    "parse_text",
    "render_tokens",
    "accuracy",
]

#: The alphabet every task uses: token id t is the character DIGITS[t].
DIGITS = "0123456789"
#: Longest sequence a task will sample (keeps one batch's memory bounded).
MAX_LENGTH = 100_000
#: Parameters larger than this make no sense for sequences the app can show.
MAX_PARAM = 4096


class Sample(NamedTuple):
    """One batch of a task: unpacks as ``inputs, targets, mask``."""

    inputs: torch.Tensor   # LongTensor [B, L], token ids
    targets: torch.Tensor  # LongTensor [B, L], token ids (0 where mask is False)
    mask: torch.Tensor     # BoolTensor [B, L], True at the positions that count


def _param(cli: str, help_text: str, default: int, *, label: str, app: tuple[int, int, int]) -> Any:
    """A task parameter: an int field plus the command-line flag and help the CLI shows, and the app's slider
    (``label``; ``app``: its minimum, maximum and default)."""
    return field(default=default, metadata={"cli": cli, "help": help_text, "label": label, "app": app})


@dataclass(frozen=True)
class TaskSlider:
    """A task parameter as the app's training form shows it."""

    field: str
    label: str
    minimum: int
    maximum: int
    default: int


@dataclass(frozen=True)
class Task(ABC):
    """A seeded synthetic task. Subclasses are frozen dataclasses whose fields are its parameters."""

    #: Registry name (``make_task(name)``), set by each subclass.
    name: ClassVar[str]
    #: One sentence for the app and the CLI.
    summary: ClassVar[str]
    alphabet: ClassVar[str] = DIGITS

    @property
    def vocab_size(self) -> int:
        return len(self.alphabet)

    @property
    @abstractmethod
    def first_counted(self) -> int:
        """The first position whose target is defined (earlier ones are masked out)."""

    @abstractmethod
    def _targets(self, inputs: torch.Tensor) -> torch.Tensor:
        """Targets for every position of a valid [B, L] batch (masked ones may hold anything)."""

    @property
    def min_length(self) -> int:
        """Shortest sequence with at least one position that counts."""
        return self.first_counted + 1

    def describe(self) -> str:
        """The task with its parameters, e.g. ``shift(s=5)``."""
        args = ", ".join(f"{k}={v}" for k, v in self.params().items())
        return f"{self.name}({args})"

    def params(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    @classmethod
    def sliders(cls) -> list[TaskSlider]:
        """The task's parameters as the app's training form shows them."""
        return [TaskSlider(f.name, f.metadata["label"], *f.metadata["app"]) for f in dataclasses.fields(cls)]

    @property
    def answer_offset(self) -> int | None:
        """The one offset j − i where every answer sits (None: no single offset holds it)."""
        return None

    @property
    def answer_window(self) -> tuple[int, int] | None:
        """The offsets j − i (first, last) the answer is computed from, when they form a window; else None."""
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"name": ..., "params": {...}}``; :func:`task_from_dict` reverses it."""
        return {"name": self.name, "params": self.params()}

    def check_length(self, length: object) -> int:
        """Refuse lengths too short to have a position that counts, saying which length would."""
        length = check_int("length", length, minimum=1, maximum=MAX_LENGTH)
        if length < self.min_length:
            raise ValueError(f"length must be at least {self.min_length} for {self.describe()}: "
                             f"positions before {self.first_counted} have no answer; got {length}")
        return length

    def targets(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(targets, mask) for given inputs [B, L] or [L], e.g. a sequence a user typed.

        A sequence too short to have any position that counts is allowed here (its mask is
        all False): the app can still show it.
        """
        if not isinstance(inputs, torch.Tensor) or inputs.dtype != torch.long or inputs.dim() not in (1, 2):
            raise ValueError("inputs must be a LongTensor of shape [B, L] or [L]")
        if inputs.numel() and (int(inputs.min()) < 0 or int(inputs.max()) >= self.vocab_size):
            raise ValueError(f"inputs must be token ids from 0 to {self.vocab_size - 1}")
        squeeze = inputs.dim() == 1
        batch = inputs.unsqueeze(0) if squeeze else inputs
        positions = torch.arange(batch.shape[1], device=batch.device)
        mask = (positions >= self.first_counted).expand(batch.shape).clone()
        targets = torch.where(mask, self._targets(batch), torch.zeros_like(batch))
        return (targets[0], mask[0]) if squeeze else (targets, mask)

    def accuracy(self, predictions: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> float:
        """The task's metric: token accuracy over the positions that count (see :func:`accuracy`)."""
        return accuracy(predictions, targets, mask)

    def sample(self, batch: int, length: int, generator: torch.Generator) -> Sample:
        """A batch of uniformly random sequences with their targets; the same generator state
        gives the same batch. Tensors live on the generator's device."""
        batch = check_int("batch", batch, minimum=1, maximum=1_000_000)
        length = self.check_length(length)
        if batch * length > 2**26:
            raise ValueError(f"batch * length must be at most {2**26}; got {batch} * {length}")
        if not isinstance(generator, torch.Generator):
            raise ValueError(f"generator must be a torch.Generator; got {type(generator).__name__}")
        inputs = torch.randint(0, self.vocab_size, (batch, length), generator=generator,
                               device=generator.device)
        targets, mask = self.targets(inputs)
        return Sample(inputs, targets, mask)


@dataclass(frozen=True)
class Shift(Task):
    """Output the input token s positions back: target_i = x_(i − s), for i ≥ s."""

    name: ClassVar[str] = "shift"
    summary: ClassVar[str] = ("Output the token s places back. The answer always sits at relative "
                              "position j − i = −s.")
    s: int = _param("shift", "how many positions back the answer is (s >= 1)", 5,
                    label="shift s (answer at j − i = −s)", app=(1, 16, 5))

    def __post_init__(self) -> None:
        check_int("shift s", self.s, minimum=1, maximum=MAX_PARAM)

    @property
    def first_counted(self) -> int:
        return self.s

    @property
    def answer_offset(self) -> int:
        return -self.s

    def _targets(self, inputs: torch.Tensor) -> torch.Tensor:
        return inputs.roll(self.s, dims=1)  # wrapped-around entries sit at masked positions


@dataclass(frozen=True)
class WindowMax(Task):
    """Output the largest of the last w tokens, the current one included, for i ≥ w − 1."""

    name: ClassVar[str] = "window_max"
    summary: ClassVar[str] = ("Output the largest of the last w tokens (the current one included): "
                              "a local window, relative offsets −(w − 1)..0.")
    w: int = _param("window", "window size, the current token included (w >= 1)", 3,
                    label="window w (max of the last w tokens)", app=(1, 8, 3))

    def __post_init__(self) -> None:
        check_int("window_max w", self.w, minimum=1, maximum=MAX_PARAM)

    @property
    def first_counted(self) -> int:
        return self.w - 1

    @property
    def answer_window(self) -> tuple[int, int]:
        return -(self.w - 1), 0

    def _targets(self, inputs: torch.Tensor) -> torch.Tensor:
        if inputs.shape[1] < self.w:
            return torch.zeros_like(inputs)
        # windows[:, t] covers positions t .. t + w − 1; it belongs to position t + w − 1
        windows = inputs.unfold(1, self.w, 1).amax(dim=-1)
        return torch.cat([torch.zeros_like(inputs[:, : self.w - 1]), windows], dim=1)


@dataclass(frozen=True)
class Absolute(Task):
    """Output the token at absolute position p: target_i = x_p, for i ≥ p."""

    name: ClassVar[str] = "absolute"
    summary: ClassVar[str] = ("Output the token at absolute position p (from position p on). "
                              "Nothing here is relative: relative-only schemes should struggle.")
    p: int = _param("position", "the absolute position to copy (p >= 0)", 12, label="absolute position p",
                    app=(0, 31, 4))

    def __post_init__(self) -> None:
        check_int("absolute p", self.p, minimum=0, maximum=MAX_PARAM)

    @property
    def first_counted(self) -> int:
        return self.p

    def _targets(self, inputs: torch.Tensor) -> torch.Tensor:
        if inputs.shape[1] <= self.p:
            return torch.zeros_like(inputs)
        return inputs[:, self.p: self.p + 1].expand(inputs.shape).clone()


#: name -> task class; the app and the CLI list tasks from here.
TASKS: dict[str, type[Task]] = {cls.name: cls for cls in (Shift, WindowMax, Absolute)}
DEFAULT_TASK = "shift"


def _task_class(name: object) -> type[Task]:
    if not isinstance(name, str) or name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}")
    return TASKS[name]


def make_task(name: str = DEFAULT_TASK, **params: int) -> Task:
    """Build a task by registry name, e.g. ``make_task("shift", s=5)``; unknown names or
    parameters raise ValueError listing the allowed ones."""
    cls = _task_class(name)
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"task {name!r} has no parameter {', '.join(unknown)}; "
                         f"its parameters: {', '.join(allowed) or 'none'}")
    return cls(**params)


def task_from_dict(data: object) -> Task:
    """Rebuild a task from :meth:`Task.to_dict` output (e.g. a checkpoint's JSON), validating it."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) \
            or not isinstance(data.get("params", {}), dict):
        raise ValueError('task must be an object {"name": str, "params": {...}}; got ' + repr(data)[:200])
    return make_task(data["name"], **data.get("params", {}))


def task_param_specs(name: str) -> list[tuple[str, str, int, str]]:
    """(field, cli flag, default, help) for each parameter of a task: what a CLI or a page
    needs to offer it."""
    return [(f.name, f.metadata["cli"], f.default, f.metadata["help"])
            for f in dataclasses.fields(_task_class(name))]


def parse_text(text: str, alphabet: str = DIGITS) -> torch.Tensor:
    """A typed sequence -> LongTensor [L] of token ids.

    Surrounding whitespace is ignored; any other character outside the alphabet is refused
    with a message naming each bad character and its position.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string; got {type(text).__name__}")
    if not isinstance(alphabet, str) or not alphabet:
        raise ValueError(f"alphabet must be a non-empty string of characters; got {alphabet!r}")
    text = text.strip()
    if not text:
        raise ValueError(f"the sequence is empty: type at least one character from {alphabet!r}")
    if len(text) > MAX_LENGTH:
        raise ValueError(f"the sequence is too long: at most {MAX_LENGTH} characters; got {len(text)}")
    index = {ch: i for i, ch in enumerate(alphabet)}
    bad = [(pos, ch) for pos, ch in enumerate(text) if ch not in index]
    if bad:
        shown = ", ".join(f"{ch!r} at position {pos}" for pos, ch in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise ValueError(f"only the characters {alphabet!r} are allowed; found {shown}{more}")
    return torch.tensor([index[ch] for ch in text], dtype=torch.long)


def render_tokens(tokens: torch.Tensor | list[int], alphabet: str = DIGITS) -> str:
    """Token ids [L] -> the string they stand for (inverse of :func:`parse_text`)."""
    ids = tokens.tolist() if isinstance(tokens, torch.Tensor) else list(tokens)
    if ids and isinstance(ids[0], list):
        raise ValueError("render_tokens takes one sequence [L], not a batch")
    bad = [t for t in ids if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < len(alphabet)]
    if bad:
        raise ValueError(f"tokens must be ids from 0 to {len(alphabet) - 1}; got {bad[:5]}")
    return "".join(alphabet[t] for t in ids)


def accuracy(predictions: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> float:
    """Token accuracy: the fraction of counted positions (mask True) where prediction == target.

    ``predictions`` may be token ids [B, L] or logits [B, L, V] (argmax is taken).
    """
    if predictions.dim() == targets.dim() + 1:
        predictions = predictions.argmax(dim=-1)
    if predictions.shape != targets.shape or mask.shape != targets.shape:
        raise ValueError(f"predictions, targets and mask must have the same shape; got "
                         f"{tuple(predictions.shape)}, {tuple(targets.shape)}, {tuple(mask.shape)}")
    counted = int(mask.sum())
    if counted == 0:
        raise ValueError("no position counts (mask is all False): the sequence is too short for the task")
    return float(((predictions == targets) & mask).sum()) / counted
