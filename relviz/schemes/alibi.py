"""``alibi``: Press et al., Train Short, Test Long: a fixed per-head penalty −m_h · |j − i|
on the attention logits; slopes a geometric sequence set by the head count."""
from __future__ import annotations

from relviz.mechanisms.alibi import Alibi
from relviz.positions import alibi_power_of_two
from relviz.schemes.base import Scheme


class AlibiScheme(Scheme):
    """No parameters: the slopes follow from the number of heads."""

    name = "alibi"
    concept = Alibi
    summary = "ALiBi: a fixed per-head penalty −slope · |j − i| on the attention logits"
    order = 6
    # The penalty only grows with distance, so no head can single out offset −5 by position alone:
    # the model composes it over layers. Measured on shift-by-5, one thread: 2 layers 72 %, 3 layers
    # 84–91 %, 4 layers 92–97.6 %, 5 layers 98.4 %, 6 narrow layers (d_ff 64, lr 1e-2) 99.6 % in 42 s.
    training_defaults = {"model": {"n_layers": 6, "d_ff": 64}, "training": {"lr": 1e-2}}
    shape_note = ("ALiBi 6 (its penalty cannot single out one offset, so the model composes it from layer to layer; "
                  "with 2 it reaches 72%)")

    def mechanism(self, layer: int) -> Alibi:
        """Press et al.'s slopes in the reference code's arithmetic (Python floats), as the toy was trained."""
        return Alibi(heads=self.config.n_heads, float32_powers=False)


def slope_rule_text(heads: int) -> str:
    """The sentence (markdown) that explains Press et al.'s slopes for ``heads`` heads (the Absolute vs relative
    page, beside its slope chart: blue the nearest lower power of 2's slopes, orange those taken from 2p)."""
    p = alibi_power_of_two(heads)
    if heads == 1:
        return "**1 head is a power of 2:** its one slope is 2^(−8/1) = 2^−8 = 1/256."
    if p == heads:
        return (f"**{heads} heads is a power of 2:** the slopes are the geometric sequence that starts at "
                f"2^(−8/{p}) = {2 ** (-8 / heads):.4g} with that same ratio, down to 2^−8 = 1/256"
                f"{' (8 heads: 1/2, 1/4, …, 1/256)' if heads == 8 else ''}.")
    extra = heads - p
    first = f"2^(−8/{p})" if p > 1 else "2^−8"
    steepest_blue, first_extra = 8 / p, 4 / p
    return (f"**{heads} heads is not a power of 2.** The rule of the reference code: take the {p} slopes "
            f"of the nearest lower power of 2 (blue: {first} … 2^−8), then the remaining {extra} from the "
            f"{2 * p}-head sequence (2^(−8/{2 * p}), 2^(−16/{2 * p}), …), taking **every other one**, "
            f"starting with the first (orange). That first one, 2^−{first_extra:g}, is **steeper than every "
            f"blue slope** (the steepest blue is 2^−{steepest_blue:g}), so the range of steepness widens at "
            f"the steep end"
            + (f"; the other {extra - 1} fall between blue slopes" if extra > 1 else "")
            + f". No slope repeats. Codebases that instead use 2^(−8h/{heads}) (grey marks) or the first "
            f"{heads} slopes of {2 * p} heads do not match a model trained with the reference.")
