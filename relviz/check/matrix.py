"""Checking a position matrix (relative index, Shaw clip index, T5 buckets, ALiBi bias and slopes, skew).

A learner who implements a relative position scheme gets a matrix out of it. This module compares that
matrix with the reference for the given settings (or finds the settings that fit best on a bounded
grid), lists the first mismatching cells with i, j, j − i, expected and got, and names the likely
cause. A cause is named only when relviz has *computed* that mistake (the sign flipped, the log in
bfloat16, Mesh TensorFlow's float32 arithmetic, ...) for the same settings and found that it
reproduces the upload exactly on every compared cell; it is never a guess.

Each kind is a ``MatrixKind`` (its reference, its named mistakes, its settings grid) registered in
``MATRIX_KINDS`` by relviz.check.matrix_kinds; this engine never compares kind names.

Sign convention: relative position = key index − query index (j − i).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from relviz._checks import check_bool, check_int
from relviz.check.reading import MAX_SIDE
from relviz.check.registry import Kind, register
from relviz.check.result import (
    ATOL, FIRST_MISMATCHES, RTOL, Cause, CheckResult, Mismatch, equal, number, partial_cause, partial_worth_showing,
    reproduction,
)

#: The settings search's work bound: candidates evaluated (one reference or named mistake built for one
#: setting, on the first row and column or on every cell) and the cells they cover. Every valid upload's
#: settings are found within it: the longest reference pass (a non-square T5 map reaching bucket 62:
#: 3,012 settings; ALiBi's 2,080 (head count, head) pairs share 64 distinct slopes per q_offset) needs
#: fewer than FIT_MAX_EVALUATIONS, and at most 3,012 × 1,023 cells. Named mistakes are searched in the
#: work left, closest settings first.
FIT_MAX_EVALUATIONS = 6000
FIT_MAX_CELLS = 8_000_000


@dataclass(frozen=True)
class Settings:
    """Every setting any position-matrix kind uses; each kind reads only its own (``Kind.settings``)."""

    q_offset: int = 0
    k: int = 3
    num_buckets: int = 32
    max_distance: int = 128
    bidirectional: bool = True
    num_heads: int = 8
    head: int = 0
    causal: bool = False
    full: bool = False
    alibi_bias_max: float = 8.0


@dataclass(frozen=True)
class Grid:
    """The cells of a q_len × k_len matrix: query i, key j (broadcastable int64 arrays).

    With ``border=True`` only the first column (bottom to top) and the first row: one cell per
    offset, all a Toeplitz matrix holds, which is what the settings search scores cheaply.
    """

    q_len: int
    k_len: int
    border: bool = False

    @property
    def i(self) -> np.ndarray:
        if self.border:
            return np.concatenate([np.arange(self.q_len - 1, -1, -1), np.zeros(self.k_len - 1, dtype=np.int64)])
        return np.arange(self.q_len)[:, None]

    @property
    def j(self) -> np.ndarray:
        if self.border:
            return np.concatenate([np.zeros(self.q_len, dtype=np.int64), np.arange(1, self.k_len)])
        return np.arange(self.k_len)[None, :]

    def toeplitz(self, per_offset: Callable[[np.ndarray], np.ndarray], q_offset: int) -> np.ndarray:
        """per_offset(n) evaluated once per offset n = j − (q_offset + i), expanded to [q_len, k_len]."""
        lowest = -(self.q_len - 1) - q_offset
        values = np.asarray(per_offset(np.arange(lowest, lowest + self.q_len + self.k_len - 1)))
        return values if self.border else values[self.j - self.i + self.q_len - 1]


Build = Callable[[Grid, Settings], "np.ndarray | None"]


@dataclass(frozen=True)
class Variant:
    """One mistake (or a harmless alternative convention) relviz can compute for given settings.

    ``build(grid, settings)`` gives its matrix (None: it does not exist at these settings); a mistake
    with a free parameter of its own gives ``candidates(grid, settings, got)``, the matrices worth
    comparing with this upload (the seed notebook's table size is read off the upload's diagonal).
    """

    name: str
    explanation: str
    build: Build
    harmless: bool = False
    candidates: Callable[[Grid, Settings, np.ndarray], Iterable[np.ndarray]] | None = None


@dataclass(frozen=True)
class MatrixKind:
    """A position-matrix kind: what the engine needs to check, search and explain it.

    ``vector``: the upload is one row of values (slopes), not a q_len × k_len matrix; ``toeplitz``:
    every value depends on j − i only (the settings search then scores one cell per offset);
    ``integer``: the values are indices (a non-integer upload cannot match); ``offsets``: the
    mismatch table's j − i is relative to the query offset (False: plain j − i); ``candidates(got)``:
    the bounded settings grid (None: nothing to search); ``key(s)``: settings with the same key have
    the same reference; ``compared(grid, s)``: the cells that count (None: all).
    """

    name: str
    description: str
    settings: tuple[str, ...]
    reference: Build
    variants: tuple[Variant, ...]
    validate: Callable[[Settings, tuple[int, ...]], None]
    candidates: Callable[[np.ndarray], list[Settings]] | None = None
    key: Callable[[Settings], tuple] | None = None
    compared: Callable[[Grid, Settings], np.ndarray] | None = None
    note: Callable[[Settings], str] | None = None
    hint: str = ""
    #: How to call a user's function for this kind (relviz.check.callables) and its documented signature.
    invoke: Callable[[Callable[..., object], Settings, int], object] | None = None
    signature: str = ""
    vector: bool = False
    toeplitz: bool = True
    integer: bool = False
    offsets: bool = True


MATRIX_KINDS: dict[str, MatrixKind] = {}


def register_matrix_kind(spec: MatrixKind) -> MatrixKind:
    """Make ``spec`` a kind of relviz.check (the command line, check(), the Check page)."""
    MATRIX_KINDS[spec.name] = spec
    register(Kind(spec.name, spec.description, spec.settings, lambda got, s, name=spec.name: check(name, got, s),
                  hint=spec.hint, max_side=MAX_SIDE, from_args=settings_from_args, invoke=spec.invoke,
                  signature=spec.signature,
                  variant=lambda cause, shape, s, name=spec.name: variant_matrix(name, cause, shape, s)))
    return spec


def settings_from_args(args: object, shape: tuple[int, ...] | None = None) -> Settings:
    """Settings from ``python -m relviz check``'s flags (every matrix kind reads its own)."""
    return Settings(q_offset=args.q_offset, k=args.k, num_buckets=args.num_buckets, max_distance=args.max_distance,
                    bidirectional=args.bidirectional, num_heads=args.num_heads, head=args.head, causal=args.causal,
                    full=args.full, alibi_bias_max=args.alibi_bias_max)


def spec_of(kind: object) -> MatrixKind:
    if not isinstance(kind, str) or kind not in MATRIX_KINDS:
        raise ValueError(f"kind must be one of {', '.join(MATRIX_KINDS)}; got {kind!r}")
    return MATRIX_KINDS[kind]


def check_kind(kind: object) -> str:
    return spec_of(kind).name


def validate_settings(kind: str, settings: Settings, shape: tuple[int, ...]) -> Settings:
    """Refuse settings the reference cannot serve, naming the parameter and the allowed range."""
    spec = spec_of(kind)
    if not isinstance(settings, Settings):
        raise ValueError(f"settings for kind {kind!r} must be a relviz.check.Settings; got {type(settings).__name__}")
    q_len, k_len = (shape + (1,))[:2] if len(shape) == 2 else (1, shape[0])
    check_int("q_offset", settings.q_offset, minimum=-q_len - MAX_SIDE, maximum=k_len + MAX_SIDE)
    check_bool("causal", settings.causal)
    check_bool("full", settings.full)
    if spec.vector and len(shape) == 2 and min(shape) != 1:
        raise ValueError(f"{kind} must be one row or column of values; got shape {shape}")
    if not spec.vector and len(shape) != 2:
        raise ValueError(f"a {spec.description} is a 2-D matrix; got a vector of {shape[0]} values")
    spec.validate(settings, shape)
    return settings


def reference(kind: str, shape: tuple[int, ...], settings: Settings) -> np.ndarray:
    """relviz's reference for ``kind`` at ``shape`` and ``settings`` (validated)."""
    validate_settings(kind, settings, shape)
    return _shaped(spec_of(kind).reference(_grid(kind, shape), settings), shape)


def variant_matrix(kind: str, name: str, shape: tuple[int, ...], settings: Settings) -> np.ndarray | None:
    """The matrix the named mistake produces at ``shape`` and ``settings`` (None: it does not apply)."""
    spec = spec_of(kind)
    validate_settings(kind, settings, shape)
    for variant in spec.variants:
        if variant.name == name:
            built = variant.build(_grid(kind, shape), settings)
            return None if built is None else _shaped(np.asarray(built), shape)
    raise ValueError(f"name must be one of the {kind} causes: {', '.join(v.name for v in spec.variants)}; "
                     f"got {name!r}")


def _grid(kind: str, shape: tuple[int, ...], *, border: bool = False) -> Grid:
    if spec_of(kind).vector:
        return Grid(1, int(np.prod(shape)))
    return Grid(int(shape[0]), int(shape[1]), border)


def _full(grid: Grid) -> tuple[int, ...]:
    return (grid.q_len + grid.k_len - 1,) if grid.border else (grid.q_len, grid.k_len)


def _shaped(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(values).reshape(shape)


# ---------------------------------------------------------------------------------------
# Comparing


def _compared(kind: str, grid: Grid, s: Settings, shape: tuple[int, ...]) -> np.ndarray:
    mask_of = spec_of(kind).compared
    mask = np.ones((1, 1), dtype=bool) if mask_of is None else mask_of(grid, s)
    return np.broadcast_to(mask, (grid.q_len, grid.k_len)).reshape(shape)


def compare(kind: str, got: np.ndarray, settings: Settings, *, fitted: bool = False) -> CheckResult:
    """Compare ``got`` with the reference for ``settings``; name the cause when a computed mistake
    reproduces ``got`` on every compared cell."""
    spec = spec_of(kind)
    got = np.asarray(got)
    shape = tuple(got.shape)
    validate_settings(kind, settings, shape)
    grid = _grid(kind, shape)
    expected = _shaped(spec.reference(grid, settings), shape)
    compared = _compared(kind, grid, settings, shape)
    mismatch = ~equal(expected, got) & compared
    first = _first(mismatch, expected, got, grid, settings if spec.offsets else replace(settings, q_offset=0))
    causes: list[Cause] = []
    closest = None
    if mismatch.any():
        cells = max(1, int(compared.sum()))
        reference_share = 1.0 - int(mismatch.sum()) / cells
        # the special cases of the search (relviz.check.search) are left to it: it names them (explain)
        for variant, built in _variants(kind, grid, settings, got, _searched(spec)):
            matches = equal(built, got) | ~compared
            if matches.all():
                if variant.name not in [c.name for c in causes]:
                    causes.append(Cause(variant.name, variant.explanation, variant.harmless, 1.0,
                                        reproduction(lambda built=built: built, got)))
                continue
            # a partial fit: the share of the compared cells it reproduces, kept only when that beats the
            # reference's own share (a mistake that reproduces fewer cells than no mistake explains nothing)
            explained = float((matches & compared).sum()) / cells
            if partial_worth_showing(explained, reference_share) and (closest is None or explained > closest.explains):
                closest = partial_cause(variant.name, variant.explanation, variant.harmless, explained)
    note = spec.note(settings) if spec.note else ""
    return CheckResult(kind, settings, fitted, expected, got, compared, mismatch, first,
                       tuple(causes), None if causes else closest, note)


def _searched(spec: MatrixKind) -> frozenset[str]:
    """The named mistakes of ``spec`` that the fit-then-explain search finds under the same name (a step of the
    kind's formula, or the sign flip): compare leaves them to it."""
    from relviz.check.matrix_spaces import SPACES
    from relviz.check.search import SIGN_PHRASE

    space = SPACES.get(spec.name)
    if space is None:
        return frozenset()
    return frozenset({step.name for step in space.steps if step.name} | ({SIGN_PHRASE} if space.flip else set()))


def _variants(kind: str, grid: Grid, s: Settings, got: np.ndarray,
              skip: frozenset[str] = frozenset()) -> Iterator[tuple[Variant, np.ndarray]]:
    """Every named mistake that applies at these settings (but those named in ``skip``), built on ``grid``."""
    shape = (grid.q_len + grid.k_len - 1,) if grid.border else tuple(got.shape)
    for variant in spec_of(kind).variants:
        if variant.name in skip:
            continue
        built_all = (variant.candidates(grid, s, got) if variant.candidates is not None
                     else [variant.build(grid, s)])
        for built in built_all:
            if built is not None:
                yield variant, _shaped(np.broadcast_to(np.asarray(built), _full(grid)), shape)


def _first(mismatch: np.ndarray, expected: np.ndarray, got: np.ndarray, grid: Grid,
           s: Settings) -> tuple[Mismatch, ...]:
    cells = np.argwhere(mismatch.reshape(grid.q_len, grid.k_len))[:FIRST_MISMATCHES]
    e, g = expected.reshape(grid.q_len, grid.k_len), got.reshape(grid.q_len, grid.k_len)
    return tuple(Mismatch(int(i), int(j), int(j - i - s.q_offset), number(e[i, j]), number(g[i, j]))
                 for i, j in cells)


# ---------------------------------------------------------------------------------------
# Finding the settings that fit


def fit_candidates(kind: str, got: np.ndarray) -> list[Settings]:
    """The bounded grid of settings the search tries for ``kind``, the common defaults first (where
    several settings give the same matrix, the search reports the first)."""
    spec = spec_of(kind)
    return [Settings()] if spec.candidates is None else spec.candidates(got)


@dataclass
class FitWork:
    """What one settings search evaluated; it stops (``capped``) at FIT_MAX_EVALUATIONS or FIT_MAX_CELLS."""

    evaluations: int = 0
    cells: int = 0
    capped: bool = False

    def spend(self, cells: int, count: int = 1) -> bool:
        """Account for ``count`` evaluations over ``cells`` cells; False (and capped) once over the bound."""
        if self.evaluations + count > FIT_MAX_EVALUATIONS or self.cells + cells > FIT_MAX_CELLS:
            self.capped = True
            return False
        self.evaluations += count
        self.cells += cells
        return True


def exact_fit_possible(kind: str, got: np.ndarray) -> bool:
    """Whether any setting's reference or named mistake could equal ``got``: each is a function of the
    offset alone (a Toeplitz matrix), and the index kinds hold integers. A corrupted or random upload
    fails this in one O(q_len · k_len) pass, so the search skips confirming candidates on every cell.
    A kind with a compared mask (causal ALiBi compares only j − i ≤ q_offset) need only be Toeplitz there."""
    spec = spec_of(kind)
    if got.ndim != 2 or min(got.shape) < 1 or not spec.toeplitz:
        return True
    values = got.astype(np.float64)
    if spec.integer:
        with np.errstate(invalid="ignore"):
            if not (np.isfinite(values).all() and (values == np.round(values)).all()):
                return False
    a, b = values[1:, 1:], values[:-1, :-1]  # (i, j) and (i − 1, j − 1): the same offset
    with np.errstate(invalid="ignore"):
        # 3× the comparison's tolerance: two cells each within tolerance of one reference value
        same = np.isclose(a, b, rtol=3 * RTOL, atol=3 * ATOL) | (a == b)
    if same.all():
        return True
    if spec.compared is None:
        return False
    q_len, k_len = got.shape
    lowest = min(0, k_len - q_len)  # the smallest q_offset the search tries
    later = (np.arange(1, k_len)[None, :] - np.arange(1, q_len)[:, None]) > lowest
    return bool((same | later).all())


def fit(kind: str, got: np.ndarray, *, work: FitWork | None = None) -> CheckResult:
    """Find the settings on the bounded grid that explain ``got`` best, then compare with them.

    Order of preference: settings where the reference matches exactly; else settings where a named
    mistake matches exactly; else the settings whose reference agrees with most cells. Candidates are
    scored on the first row and column (every offset of a Toeplitz matrix: q_len + k_len − 1 cells),
    and confirmed on every cell. The work is bounded (``work`` counts it, FitWork's caps stop it): an
    upload no setting can match exactly (:func:`exact_fit_possible`) gets no confirmations and no search
    for named mistakes, and the first exact fit ends the search.
    """
    spec = spec_of(kind)
    got = np.asarray(got)
    shape = tuple(got.shape)
    validate_settings(kind, Settings(), shape)
    work = work if work is not None else FitWork()
    if spec.candidates is None:
        return compare(kind, got, Settings(), fitted=True)
    candidates = fit_candidates(kind, got) or [Settings()]
    border_grid = _grid(kind, shape, border=True)
    border = _border(got)
    full_cost = int(np.prod(shape)) * (1 + len(spec.variants))  # a confirmation, with its causes
    possible = exact_fit_possible(kind, got)
    best: tuple[float, Settings] | None = None
    cache: dict[tuple, np.ndarray] = {}
    scores: list[float] = []
    for s in candidates:
        key = _toeplitz_key(kind, s)
        if key not in cache:
            if not work.spend(border.size):
                break
            cache[key] = spec.reference(border_grid, s)
        agree = equal(cache[key], border) | _masked(kind, border_grid, s)
        score = float(agree.mean())
        scores.append(score)
        if best is None or score > best[0]:
            best = (score, s)
        if score == 1.0:
            if not possible:
                break  # every offset agrees: nothing scores higher, and no setting matches every cell
            if not work.spend(full_cost, 1 + len(spec.variants)):
                break
            result = compare(kind, got, s, fitted=True)
            if result.ok:
                return result
    if possible and not work.capped:
        # Closest settings first (most named mistakes change few offsets); ties keep the defaults first.
        order = sorted(range(len(scores)), key=lambda n: -scores[n])
        searched = _searched(spec)
        for s in (candidates[n] for n in order):
            if s.causal:
                continue  # the same settings unmasked are a candidate too; a mask adds no mistake of its own
            for _, built in _variants(kind, border_grid, s, got, searched):
                if not work.spend(border.size):
                    break
                if equal(built, border).all():
                    if not work.spend(full_cost, 1 + len(spec.variants)):
                        break
                    result = compare(kind, got, s, fitted=True)
                    if result.cause:
                        return result
                    break
            if work.capped:
                break
    result = compare(kind, got, best[1] if best else candidates[0], fitted=True)
    if work.capped:
        note = (f"The settings search stopped at its work bound ({work.evaluations:,} candidates evaluated): "
                "these are the best settings found by then. Give the settings to check against them exactly.")
        result = replace(result, note=(result.note + " " + note).strip())
    return result


def _masked(kind: str, grid: Grid, s: Settings) -> np.ndarray:
    """Cells the check ignores at these settings (keys after the query for causal ALiBi), on a full or
    border grid."""
    mask_of = spec_of(kind).compared
    if mask_of is None:
        return np.zeros(1, dtype=bool)
    return ~np.broadcast_to(mask_of(grid, s), np.broadcast_shapes(grid.i.shape, grid.j.shape))


def _border(matrix: np.ndarray) -> np.ndarray:
    """First column (bottom to top) and first row: one cell per offset of a q_len × k_len matrix."""
    return np.concatenate([matrix[::-1, 0], matrix[0, 1:]])


def _toeplitz_key(kind: str, s: Settings) -> tuple:
    """Settings with the same key have the same reference (ALiBi: many head counts share a slope)."""
    spec = spec_of(kind)
    if spec.key is not None:
        return spec.key(s)
    return tuple(getattr(s, name) for name in spec.settings if name != "causal")


def check(kind: str, got: np.ndarray, settings: Settings | None = None) -> CheckResult:
    """Compare with the given settings, or search for the best-fitting ones when ``settings`` is None; then
    explain a mismatch no named mistake reproduces (relviz.check.search.explain)."""
    from relviz.check.search import explain  # here: search's explain imports this module

    result = fit(kind, got) if settings is None else compare(kind, got, settings)
    return explain(result, settings)


def fits_another_kind(kind: str, got: np.ndarray) -> CheckResult | None:
    """The first other position-matrix kind whose settings search (each within its own work bound) reproduces
    ``got`` exactly: a T5 map checked as a relative index is a mistake too, of another kind."""
    got = np.asarray(got)
    for name in MATRIX_KINDS:
        if name == spec_of(kind).name:
            continue
        try:
            validate_settings(name, Settings(), tuple(got.shape))
        except ValueError:
            continue  # the other kind's shape rules rule it out
        if not exact_fit_possible(name, got):
            continue
        result = fit(name, got, work=FitWork())
        if result.ok:
            return result
    return None
