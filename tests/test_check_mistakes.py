"""Mistakes no list holds: seeded random mistakes for every registered check kind (relviz.check.mistakes), each verdict
held to the rule from outside the checker's search (relviz.check.verify). A fast seeded subset of
``python -m relviz bench --only mistakes``, and the two holes that sweep found, each as its own case."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import relviz.check as C
from relviz.check import matrix_kinds as MK
from relviz.check import mistakes as M
from relviz.check import verify as V
from relviz.check.api import GATED, REGISTRY, confirmed
from relviz.check.rope import ROPE_KINDS


def offsets(q_len: int, k_len: int) -> np.ndarray:
    return np.arange(k_len)[None, :] - np.arange(q_len)[:, None]                     # [q, k] j − i


def test_every_registered_kind_is_drawn_and_its_mistakes_are_varied():
    assert M.kinds() == list(REGISTRY) and len(REGISTRY) >= 11
    for kind in REGISTRY:
        M.family_of(kind)                          # a kind no family draws raises: a new kind needs its family
    recipes = {M.case(kind, seed).recipe for kind in ("t5", "alibi_slopes") for seed in range(12)}
    assert len(recipes) >= 18 and any(" then " in r for r in recipes)
    with pytest.raises(ValueError, match="no mistake family draws"):
        M.family_of("no such kind")


#: Cases per kind: a RoPE cache's check searches settings (seconds a case), the others take a fraction of one.
def _count(kind: str) -> int:
    return 2 if kind in ROPE_KINDS else 10


@pytest.fixture(scope="module")
def subset() -> dict[str, V.Tally]:
    return {kind: V.sweep(_count(kind), seed=7000, only=[kind])[kind] for kind in REGISTRY}


def test_no_verdict_is_wrong_on_seeded_mistakes(subset):
    """Named mistakes at these or other settings, two or three composed, transformations real bugs apply, noise of
    any size: every verdict is 'ok' equal to the reference, a cause whose proof (and, for a cause of relviz's own
    list, the mistake built by its name) reproduces every compared cell, 'no cause is named', or a refusal."""
    assert {kind: tally.wrong for kind, tally in subset.items() if tally.counts["WRONG"]} == {}
    assert all(sum(tally.counts.values()) == _count(kind) for kind, tally in subset.items())
    reached = {outcome for tally in subset.values() for outcome, n in tally.counts.items() if n}
    assert {"ok", "named", "cannot tell", "refused"} <= reached


def test_one_cell_off_by_less_than_the_toeplitz_tolerance_names_no_cause():
    """A diagonal's cells may differ by up to 3× the comparison's tolerance and still read as one offset's value;
    the search took that value as the diagonal's and named 'the settings found' as the cause of a mismatch the
    reference itself has. A hypothesis is exact only when every compared cell agrees."""
    s = C.Settings(num_heads=8, head=2)
    got = C.reference("alibi", (12, 12), s)
    got[5, 2] *= 1 + 2.5e-5
    result = C.check("alibi", got, s)
    assert not result.ok and not result.causes and V.verify("alibi", got, result) == "cannot tell"
    shaw = offsets(24, 26).clip(-25, 25) + 25.0                      # Shaw's index without clipping at k 25 …
    shaw[6, 18] += 5.7e-4                                            # … one cell off by a float32 round-off
    result = C.check("shaw", shaw, C.Settings(k=25))
    assert not result.causes and V.verify("shaw", shaw, result) == "cannot tell"


def test_a_cause_found_at_other_settings_must_reproduce_the_cells_those_settings_compare():
    """A causal ALiBi row pair with one column zeroed: the fit chose q_offset 0 (three compared cells, j ≤ i), the
    search then moved to q_offset 18 with a slope rule that fits those three, and the verdict named it for the 39
    cells q_offset 18 compares. The gate: a cause's proof must reproduce every cell its verdict compares."""
    got = -MK._slopes_naive(40)[16] * np.abs(offsets(2, 20) - 18).astype(np.float64)
    got[:, 4] = 0.0
    result = C.check("alibi", got)
    assert not result.causes and V.verify("alibi", got, result) == "cannot tell"
    assert result.closest is not None and result.closest.explains < 1.0 and "Partial:" in result.verdict()
    assert f"{GATED} ({result.closest.name}) fit the cells the search compared" in result.note


def test_the_verifier_and_the_gate_refuse_a_cause_whose_proof_does_not_reproduce_the_upload():
    from dataclasses import replace

    got = C.reference("t5", (20, 20), C.Settings()) + 1                      # every bucket off by one
    result = C.check("t5", got, C.Settings())
    assert V.verify("t5", got, result) == "named" and "values off by +1" in result.cause.name
    fake = C.Cause("sign flipped", "", False, 1.0, lambda: (-got, np.zeros(got.shape)))
    forged = replace(result, causes=(fake,))
    with pytest.raises(V.Wrong, match="reproduces all but"):
        V.verify("t5", got, forged)
    kept = confirmed(forged)
    assert not kept.causes and "no cause is named" in replace(kept, difference="").verdict()
    with pytest.raises(V.Wrong, match="no proof"):
        V.verify("t5", got, replace(result, causes=(replace(fake, reproduce=None),)))
    with pytest.raises(V.Wrong, match="'ok', but"):
        ok = C.check("t5", C.reference("t5", (20, 20), C.Settings()), C.Settings())
        V.verify("t5", got, replace(ok, got=got))


@pytest.mark.parametrize("bias_max", [12.0, 4.0])
def test_a_named_slope_mistake_is_built_at_the_settings_alibi_bias_max(bias_max):
    """The sweep's third hole: 'heads in reverse order' and 'slopes rounded to bfloat16' were built from Press et
    al.'s slopes (alibi_bias_max 8) whatever the settings said, so the words named one mistake where the proof held
    another. Built at the settings' alibi_bias_max, the mistake by its name and the proof agree."""
    s = C.Settings(alibi_bias_max=bias_max)
    for name, got in (("heads in reverse order", MK._slopes(12, bias_max)[::-1].copy()),
                      ("slopes rounded to bfloat16", MK._bf16(MK._slopes(12, bias_max)))):
        result = C.check("alibi_slopes", got, s)
        assert result.cause.name == name and V.verify("alibi_slopes", got, result) == "named"
        np.testing.assert_array_equal(C.kind_of("alibi_slopes").variant(name, got.shape, s), got)


def test_a_rope_mistake_that_fits_the_probe_rows_only_is_a_partial_fit_not_a_crash():
    """The sweep's fourth hole: a named RoPE mistake that reproduced the 64 probe rows of a longer cache but not every
    row was then scored against the probe rows' mismatches with every row's matches, and numpy raised (broadcast
    (95, 6) against (64, 6)). Here a 100-row cos cache is 'base off' in every row but row 10, which no probe reads
    (the probes are 64 rows spread over 100) and which holds the reference's values."""
    from relviz.check.rope import rope_settings, variant_cache

    s = rope_settings(head_dim=8)
    got = variant_cache("rope_cos", "base off: 1e+06 instead of 10000", (100, 8), s)
    got[10] = variant_cache("rope_cos", "", (100, 8), s)[10]
    result = C.check("rope_cos", got, s)
    assert not result.causes and V.verify("rope_cos", got, result) == "cannot tell"


def test_a_result_with_a_named_cause_pickles_as_the_app_caches_it_without_its_proof():
    """The Check page keeps results in st.cache_data, which pickles them: a cause's proof is a closure, and pickling
    it raised on every named cause (tests/test_controls.py caught it on the page). The verdict survives whole."""


    got = np.arange(12)[None, :] - np.arange(12)[:, None] + 3             # [q, k] Shaw's j − i + k with no clip
    result = C.check("shaw", got, C.Settings(k=3))
    assert result.cause is not None and result.cause.reproduce is not None
    back = pickle.loads(pickle.dumps(result))
    assert back.cause == result.cause and back.cause.reproduce is None
    assert back.to_json() == result.to_json()
