"""`python -m relviz check --callable FILE.py:NAME`: relviz imports the user's own function from the user's
own file, calls it with the reference inputs, and checks what it returns (0 match, 1 mismatch, 2 refused)."""
from __future__ import annotations

import json
import textwrap

import pytest

from relviz.check.callables import call, load_callable, signatures

USER_CODE = textwrap.dedent('''
    import math
    import torch

    def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
        """Hugging Face's T5Attention._relative_position_bucket, transcribed."""
        relative_buckets = 0
        if bidirectional:
            num_buckets //= 2
            relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact
        large = max_exact + (torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
                             * (num_buckets - max_exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, num_buckets - 1))
        return relative_buckets + torch.where(is_small, relative_position, large)

    def naive_slopes(num_heads):
        return [2 ** (-8 * (h + 1) / num_heads) for h in range(num_heads)]

    class Rotary:
        @staticmethod
        def build(seq_len, head_dim):
            inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
            freqs = torch.outer(torch.arange(seq_len).float(), inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos()[None, None], emb.sin()[None, None]   # [1, 1, L, D] as many models cache them

    def raises(seq_len, head_dim):
        raise RuntimeError("shape mismatch in my code")

    def returns_text(num_heads):
        return "slopes"
''')


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "my_positions.py"
    path.write_text(USER_CODE)
    return path


def run_cli(capsys, *args):
    from relviz.__main__ import main

    code = main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_kind_documents_a_signature():
    documented = signatures()
    assert {"t5", "alibi_slopes", "rope_cos", "rope_sin", "rope_angles", "relative", "shaw", "skew",
            "alibi"} <= set(documented)
    assert documented["t5"].startswith("fn(relative_position, bidirectional, num_buckets, max_distance)")


def test_a_correct_function_exits_0_and_a_wrong_one_1(user_file, capsys):
    code, out, _ = run_cli(capsys, "--callable", f"{user_file}:t5_bucket", "--kind", "t5", "--seq-len", "200")
    assert code == 0 and "Matches" in out
    code, out, _ = run_cli(capsys, "--callable", f"{user_file}:t5_bucket", "--kind", "t5", "--unidirectional",
                           "--num-buckets", "16", "--max-distance", "64")
    assert code == 0, out
    code, out, _ = run_cli(capsys, "--callable", f"{user_file}:naive_slopes", "--kind", "alibi_slopes",
                           "--num-heads", "12", "--json")
    assert code == 1 and json.loads(out)["cause"]["name"].startswith("non-power-of-2 slopes: 2^(−8h/n)")
    code, out, _ = run_cli(capsys, "--callable", f"{user_file}:Rotary.build", "--kind", "rope_sin",
                           "--head-dim", "64", "--seq-len", "300")
    assert code == 0, out
    code, out, _ = run_cli(capsys, "--callable", f"{user_file}:Rotary.build", "--kind", "rope_cos",
                           "--head-dim", "64", "--layout", "interleaved")
    assert code == 1 and "pair layout swapped" in out


@pytest.mark.parametrize("target, extra, message", [
    ("{f}:raises", ["--kind", "rope_cos", "--head-dim", "8"], "raised RuntimeError: shape mismatch in my code"),
    ("{f}:returns_text", ["--kind", "alibi_slopes"], "returned str"),
    ("{f}:missing", ["--kind", "t5"], "defines no 'missing'"),
    ("{f}", ["--kind", "t5"], "FILE.py:NAME"),
    ("nowhere.py:fn", ["--kind", "t5"], "existing .py file"),
    ("{f}:Rotary.build", ["--kind", "rope_cos"], "--head-dim"),
])
def test_a_bad_function_is_refused_with_exit_2(user_file, capsys, target, extra, message):
    code, _, err = run_cli(capsys, "--callable", target.format(f=user_file), *extra)
    assert code == 2 and message in err, err


def test_library_call(user_file):
    from relviz.check import Settings, check

    out = call("t5", load_callable(f"{user_file}:t5_bucket"), Settings(), 40)
    assert out.shape == (40, 40) and check("t5", out, Settings()).ok


def test_a_function_with_fit_finds_its_settings(user_file, capsys):
    """Rotary.build uses θ 10^4 and half-split pairs; --fit finds them from its output alone."""
    code, out, _ = run_cli(capsys, "--callable", f"{user_file}:Rotary.build", "--kind", "rope_cos", "--head-dim", "32",
                           "--fit", "--json")
    report = json.loads(out)
    assert code == 0 and report["fitted"] and report["settings"]["base"] == 10000.0
    assert report["settings"]["layout"] == "half"
