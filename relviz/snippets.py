"""Code for this view: the few lines of PyTorch that reproduce what a page draws, for its current settings.

One function per view; each returns Python source (a string) that runs on its own (``torch`` and
``relviz`` installed) and leaves the drawn matrix in ``result`` (and, for attention biases, a
FlexAttention ``score_mod``). The settings are written into the code as literals, so a copied
snippet is exact for the view it came from. The tests execute every snippet and compare ``result``
with what the page draws.

FlexAttention (torch.nn.attention.flex_attention) hands ``score_mod`` the score already scaled by
1/sqrt(head_dim); T5 adds its bias to the raw q·k, so its snippet passes ``scale=1.0``.
Sign convention: relative position = j − i = key − query.
"""
from __future__ import annotations

from relviz._checks import check_bool, check_int

__all__ = ["shaw_snippet", "t5_snippet", "t5_precision_snippet", "skew_snippet", "sinusoidal_snippet", "alibi_snippet",
           "home_snippet"]


def _lengths(q_len: int, k_len: int, q_offset: int) -> tuple[int, int, int]:
    return (check_int("q_len", q_len, minimum=1), check_int("k_len", k_len, minimum=1),
            check_int("q_offset", q_offset))


def home_snippet(num_tokens: int) -> str:
    """The landing page's matrix: j − i for a sentence of ``num_tokens`` tokens."""
    n = check_int("num_tokens", num_tokens, minimum=1)
    return f"""import torch

positions = torch.arange({n})
result = positions[None, :] - positions[:, None]  # [query i, key j] = j - i
# the same with relviz: relviz.positions.relative_positions({n}, device="cpu")
"""


def shaw_snippet(q_len: int, k_len: int, k: int, q_offset: int = 0) -> str:
    """The Shaw page: the lookup index clip(j − i, −k, k) + k and how the table is read."""
    q_len, k_len, q_offset = _lengths(q_len, k_len, q_offset)
    k = check_int("k", k, minimum=0)
    return f"""import torch
from relviz.positions import shaw_clip_index

i = {q_offset} + torch.arange({q_len})[:, None]  # query i sits at key position {q_offset} + row
j = torch.arange({k_len})[None, :]
result = (j - i).clamp(-{k}, {k}) + {k}           # lookup index, values 0..{2 * k}
assert torch.equal(result, shaw_clip_index({q_len}, {k_len}, k={k}, q_offset={q_offset}, device="cpu"))

# Shaw et al.: {2 * k + 1} learned vectors per table, one a^K and one a^V table per layer, shared by heads
d = 64
w_K, w_V = torch.nn.Embedding({2 * k + 1}, d), torch.nn.Embedding({2 * k + 1}, d)
a_K = w_K(result)                                 # [{q_len}, {k_len}, d]: added to the keys in the score
"""


def t5_snippet(num_buckets: int, max_distance: int, bidirectional: bool, q_len: int, k_len: int,
               q_offset: int = 0) -> str:
    """The T5 page: the bucket map, and the learned bias as a FlexAttention score_mod."""
    q_len, k_len, q_offset = _lengths(q_len, k_len, q_offset)
    num_buckets = check_int("num_buckets", num_buckets, minimum=1)
    max_distance = check_int("max_distance", max_distance, minimum=1)
    bidirectional = check_bool("bidirectional", bidirectional)
    first = -(q_len - 1) - q_offset
    return f"""import torch
from torch.nn.attention.flex_attention import flex_attention
from relviz.positions import t5_bucket, t5_bucket_map

settings = dict(num_buckets={num_buckets}, max_distance={max_distance}, bidirectional={bidirectional})
offsets = torch.arange({first}, {first + q_len + k_len - 1})  # every j - i of the matrix, ascending
buckets = t5_bucket(offsets, **settings)        # one bucket per offset (per diagonal)
i = torch.arange({q_len})[:, None]
j = torch.arange({k_len})[None, :]
result = buckets[j - i + {q_len - 1}]                 # [query, key]: the bucket map
assert torch.equal(result, t5_bucket_map({q_len}, {k_len}, q_offset={q_offset}, device="cpu", **settings))

# The learned bias: one scalar per (bucket, head), shared by every layer of the stack.
heads = 8
table = torch.randn({num_buckets}, heads)             # stands for relative_attention_bias.weight
bias_per_offset = table[buckets].T.contiguous()     # [heads, {q_len + k_len - 1}]


def score_mod(score, b, h, q_idx, kv_idx):
    return score + bias_per_offset[h, kv_idx - q_idx + {q_len - 1}]

# q: [batch, heads, {q_len}, head_dim], k and v: [batch, heads, {k_len}, head_dim]
# out = flex_attention(q, k, v, score_mod=score_mod, scale=1.0)  # T5 does not scale q·k
"""


def t5_precision_snippet(num_buckets: int, max_distance: int, bidirectional: bool, max_offset: int) -> str:
    """The T5 page's precision view: the offsets whose bucket changes in bfloat16 / float16, and Mesh TF's edges."""
    num_buckets = check_int("num_buckets", num_buckets, minimum=1)
    max_distance = check_int("max_distance", max_distance, minimum=1)
    bidirectional = check_bool("bidirectional", bidirectional)
    max_offset = check_int("max_offset", max_offset, minimum=1)
    return ("import torch\nfrom relviz.positions import t5_bucket\n"
            "from relviz.precision import t5_bucket_in_dtype, t5_bucket_mesh_tf, mesh_tf_edges\n\n"
            f"settings = dict(num_buckets={num_buckets}, max_distance={max_distance}, bidirectional={bidirectional})\n"
            f"offsets = torch.arange(-{max_offset}, {max_offset + 1})\n"
            "float32 = t5_bucket(offsets, **settings)\n"
            "result = {name: offsets[t5_bucket_in_dtype(offsets, dtype, **settings) != float32]\n"
            "          for name, dtype in ((\"bfloat16\", torch.bfloat16), (\"float16\", torch.float16))}\n"
            "mesh_tf = t5_bucket_mesh_tf(offsets, **settings)   # Mesh TensorFlow's reciprocals\n"
            "edges = mesh_tf_edges(**settings)                  # offset, HF, Mesh TF, exact\n")


def skew_snippet(length: int, seed: int, bidirectional: bool = False, dim: int = 8) -> str:
    """The skew page: the demo's random Q and distance vectors, and the skewed S_rel."""
    length = check_int("length", length, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    bidirectional = check_bool("bidirectional", bidirectional)
    if bidirectional:
        tail = f"""e_all = torch.cat([e_past, e_future])          # distances -{length - 1} .. +{length - 1}
qer = q @ e_all.T                                # [{length}, {2 * length - 1}]: column m is distance m - {length - 1}
flat = qer.reshape(-1)[{length - 1}:{length - 1} + {length} * {max(2 * length - 2, 1)}]
result = flat.reshape({length}, {max(2 * length - 2, 1)})[:, :{length}]   # S_rel[i, j] = q_i · e(j - i), exact everywhere
assert torch.allclose(result, skew_bidirectional(qer))
"""
        imports = "from relviz.skew import skew_bidirectional"
    else:
        tail = f"""qer = q @ e_past.T                              # [{length}, {length}]: column m is distance m - {length - 1}
padded = torch.nn.functional.pad(qer, (1, 0))     # one zero column on the left
result = padded.reshape({length + 1}, {length})[1:]        # S_rel[i, j] = q_i · e(j - i) for j <= i
assert torch.equal(result, skew(qer))
masked = result.masked_fill(torch.ones({length}, {length}, dtype=torch.bool).triu(1), float("-inf"))
"""
        imports = "from relviz.skew import skew"
    return f"""import torch
{imports}

generator = torch.Generator().manual_seed({seed})  # the page's random inputs, D = {dim}
q = torch.randn({length}, {dim}, generator=generator)
e_past = torch.randn({length}, {dim}, generator=generator)   # distances -{length - 1} .. 0
e_future = torch.randn({length - 1}, {dim}, generator=generator)
{tail}"""


def sinusoidal_snippet(length: int, d_model: int, projected: bool = False) -> str:
    """The absolute page's top row: the encoding and its position similarity (or a random head's score)."""
    length = check_int("length", length, minimum=1)
    d_model = check_int("d_model", d_model, minimum=2)
    projected = check_bool("projected", projected)
    if projected:
        score = f"""w = torch.randn(2, {d_model}, 64, generator=torch.Generator().manual_seed(0)) / math.sqrt({d_model})
result = (pe @ w[0]) @ (pe @ w[1]).T / math.sqrt(64)  # one random head's score of the positions alone"""
    else:
        score = f"result = pe @ pe.T / ({d_model} / 2)                  # cosine similarity: depends on j - i only"
    return f"""import math
import torch

k = torch.arange({d_model // 2}, dtype=torch.float64)
omega = torch.exp(-(2 * k / {d_model}) * math.log(10000.0))   # 10000^(-2k/d_model)
angles = torch.arange({length}, dtype=torch.float64)[:, None] * omega
pe = torch.stack([angles.sin(), angles.cos()], dim=-1).reshape({length}, {d_model}).float()
{score}
"""


def alibi_snippet(length: int, num_heads: int, head: int, causal: bool = True) -> str:
    """The ALiBi panel: the selected head's bias (NaN where the causal mask hides it) and a score_mod."""
    length = check_int("length", length, minimum=1)
    num_heads = check_int("num_heads", num_heads, minimum=1)
    head = check_int("head", head, minimum=1, maximum=num_heads)
    causal = check_bool("causal", causal)
    mask = (f"""
result = result.masked_fill(j > i, float("nan"))       # the page greys out the masked keys""" if causal else "")
    flex_return = ("torch.where(kv_idx <= q_idx, score + bias, -float(\"inf\"))" if causal else "score + bias")
    return f"""import torch
from torch.nn.attention.flex_attention import flex_attention
from relviz.positions import alibi_slopes

slopes = alibi_slopes({num_heads}, device="cpu")         # fixed, not learned
i = torch.arange({length})[:, None]
j = torch.arange({length})[None, :]
result = -slopes[{head - 1}] * (j - i).abs().float()       # head {head}: -m * |j - i|{mask}


def score_mod(score, b, h, q_idx, kv_idx):
    bias = -slopes[h] * torch.abs(kv_idx - q_idx)
    return {flex_return}

# q, k, v: [batch, {num_heads}, {length}, head_dim]
# out = flex_attention(q, k, v, score_mod=score_mod)
"""
