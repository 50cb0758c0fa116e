"""Check my implementation: upload or paste the matrix your code produced; see where and why it differs."""
from __future__ import annotations

import hashlib
from types import SimpleNamespace

import pandas as pd
import streamlit as st

from relviz.app import controls, display, downloads, navigation
from relviz.check import KINDS, MAX_BYTES, MAX_SIDE, SETTINGS_OF, Settings, check, kind_of, load_matrix, rope_settings
from relviz.check.rope_fit import BASES
from relviz.figures.check import diff_heatmap
from relviz.rope.math import CACHE_LAYOUT_WORDS

navigation.ensure_app_navigation()
P = "ck"  # query-parameter prefix of this page
MAX_MB = MAX_BYTES // (1024 * 1024)

#: Ready-made uploads with a known mistake: label -> (kind, cause, shape, settings).
EXAMPLES = {
    "T5 map, sign flipped": ("t5", "sign flipped: i − j instead of j − i", (16, 16), Settings()),
    "T5 map, log in bfloat16": ("t5", "log in bfloat16", (24, 100), Settings()),
    "Shaw index, no + k": ("shaw", "signed clip, no + k", (10, 10), Settings(k=3)),
    "'T5' map from the seed notebook": ("t5", "the seed notebook's max_position² table (clipping, not buckets)",
                                        (10, 15), Settings(k=300)),
    "ALiBi slopes for 12 heads, naive": ("alibi_slopes", "non-power-of-2 slopes: 2^(−8h/n) for every n", (12,),
                                         Settings()),
    "Skew, padded on the right": ("skew", "pad on the right", (8, 8), Settings()),
    "RoPE cos cache, interleaved pairs": ("rope_cos", "pair layout swapped (interleaved vs half-split)", (48, 32),
                                          rope_settings(head_dim=32)),
    "RoPE sin cache, angles in bfloat16": ("rope_sin", "angles computed in bfloat16", (300, 16),
                                           rope_settings(head_dim=16, base=500000.0)),
}


#: The kinds a visitor can upload here (the page never runs a visitor's code).
PAGE_KINDS = [name for name in KINDS if kind_of(name).on_page]


@st.cache_data(max_entries=16, show_spinner="Comparing…")
def run_check(digest: str, kind: str, fit: bool, values: tuple, _matrix):
    """Cached by the upload's SHA-256 and the control values (scalars), never by the array itself; the kind
    builds its settings from them as from the command line's flags."""
    settings = None if fit else kind_of(kind).from_args(SimpleNamespace(**dict(values)), tuple(_matrix.shape))
    return check(kind, _matrix, settings)


def example_text(label: str) -> str:
    kind, cause, shape, settings = EXAMPLES[label]
    matrix = kind_of(kind).variant(cause, shape, settings)
    return downloads.matrix_to_csv(matrix)


def load_example() -> None:
    label = st.session_state.get(f"{P}_example")
    if label in EXAMPLES:
        st.session_state[f"{P}_paste"] = example_text(label)
        st.session_state[f"{P}_kind"] = EXAMPLES[label][0]
        st.session_state[f"{P}_fit"] = True


st.title("Check my implementation")
st.markdown(
    "Implemented a relative position scheme yourself? Give relviz the matrix your code produced and it "
    "compares it **cell by cell** with its reference, lists the first cells that differ, and names the "
    "likely cause. A cause is named only when relviz has **computed** that mistake for the same settings "
    "and it reproduces your matrix exactly.")
display.sign_convention()

with st.sidebar:
    st.subheader("What you computed")
    # the options are the command line's kind names (--kind t5, a link's ?ck_kind=rope_cos); the caption says what
    kind = st.selectbox("matrix kind (as --kind)", PAGE_KINDS, key=f"{P}_kind", bind="query-params")
    st.caption(KINDS[kind])
    fit = st.toggle("find the settings for me", False, key=f"{P}_fit", bind="query-params",
                    help="Searches a bounded grid (T5: num_buckets 2–128, common max_distances, both directions, "
                         "both query alignments; Shaw: k up to 512; ALiBi: up to 64 heads; RoPE: 12 bases from "
                         "10⁴ to 10⁷, both layouts, partial rotary, linear / YaRN / Llama 3 scaling at common "
                         "factors).")
    used = SETTINGS_OF[kind]
    disabled = fit
    q_offset = controls.number_control("query offset (first position)", -MAX_SIDE, MAX_SIDE, 0, key=f"{P}_off",
                                       disabled=disabled,
                                       help="Query i sits at key position offset + i; a RoPE cache's row m holds "
                                            "position offset + m.") if "q_offset" in used else 0
    k = st.slider("Shaw clipping distance k", 0, 64, 3, key=f"{P}_k", bind="query-params",
                  disabled=disabled) if "k" in used else 3
    nb = st.slider("num_buckets", 2, 128, 32, key=f"{P}_nb", bind="query-params",
                   disabled=disabled) if "num_buckets" in used else 32
    md = st.slider("max_distance", 1, 1024, 128, key=f"{P}_md", bind="query-params",
                   disabled=disabled) if "max_distance" in used else 128
    bidir = st.toggle("bidirectional (encoder)", True, key=f"{P}_bi", bind="query-params",
                      disabled=disabled) if "bidirectional" in used else True
    heads = st.slider("heads", 1, 64, 8, key=f"{P}_nh", bind="query-params",
                      disabled=disabled) if "num_heads" in used else 8
    head = controls.number_control("head (from 0)", 0, heads - 1, 0, key=f"{P}_head",
                                   disabled=disabled) if "head" in used else 0
    causal = st.toggle("causal: compare only keys j ≤ i", False, key=f"{P}_causal", bind="query-params",
                       disabled=disabled) if "causal" in used else False
    full = st.toggle("compare the garbage upper triangle too", False, key=f"{P}_full", bind="query-params",
                     help="The skew's cells above the diagonal are not meaningful; a faithful pad/reshape trick "
                          "still reproduces them exactly.") if "full" in used else False
    head_dim = controls.number_control("head_dim (0: the upload's width)", 0, 1024, 0, key=f"{P}_hd",
                                       disabled=disabled) if "head_dim" in used else 0
    rotary_dim = controls.number_control("rotary dims (0: all of the head)", 0, 1024, 0, key=f"{P}_rd",
                                         disabled=disabled, help="Partial rotary: only the first dims rotate "
                                                                 "(GPT-NeoX a quarter, Phi-2 0.4).") if "rotary_dim" in used else 0
    base = st.selectbox("base θ (rope_theta)", BASES, format_func=lambda b: f"{b:,.0f}", key=f"{P}_base",
                        bind="query-params", disabled=disabled) if "base" in used else 10000.0
    layout = st.selectbox("pair layout", list(CACHE_LAYOUT_WORDS), format_func=CACHE_LAYOUT_WORDS.get, key=f"{P}_layout",
                          bind="query-params", disabled=disabled) if "layout" in used else "half"
    if "scaling" in used:
        st.caption("A scaling rule (linear, YaRN, Llama 3) is found by *find the settings for me*, or given with "
                   "`--config config.json` on the command line.")

#: The control values, named as the command line's flags (each kind reads its own).
values = dict(q_offset=int(q_offset), k=int(k), num_buckets=int(nb), max_distance=int(md), bidirectional=bool(bidir),
              num_heads=int(heads), head=int(head), causal=bool(causal), full=bool(full), alibi_bias_max=8.0,
              head_dim=int(head_dim) or None, rotary_dim=int(rotary_dim) or None, base=float(base), layout=layout,
              config=None, layer=None)

left, right = st.columns([1, 1])
with left:
    upload = st.file_uploader(f".npy or CSV file (at most {MAX_MB} MB, {MAX_SIDE} × {MAX_SIDE})",
                              type=["npy", "csv", "txt"], key=f"{P}_file", max_upload_size=MAX_MB,
                              help="np.save(path, tensor.cpu().numpy()) or a CSV with or without a header row. "
                                   ".npy files are read without pickles.")
    if kind_of(kind).hint:
        st.caption(kind_of(kind).hint)
with right:
    pasted = st.text_area("…or paste it (CSV, or a printed numpy array / torch tensor)", key=f"{P}_paste",
                          height=120, max_chars=400_000, placeholder="0,1,2\n-1,0,1\n-2,-1,0")
    # a row that wraps: at 1024 px a fixed column cut the button to "load the exa…"
    row = st.container(horizontal=True, vertical_alignment="bottom")
    row.selectbox("example with a known mistake", list(EXAMPLES), key=f"{P}_example")
    row.button("load the example", key=f"{P}_load", on_click=load_example)

data, name = None, ""
if upload is not None:
    data, name = upload.getvalue(), upload.name
elif pasted.strip():
    data, name = pasted.encode("utf-8"), "pasted text"

def checked(data: bytes | None, name: str):
    """The verdict for the upload, or None with the reason shown (no st.stop(): the app's link notice
    is drawn after the page, and a stopped page would lose it)."""
    if data is None:
        st.info("Upload a file or paste a matrix (or load an example) to check it.", icon=":material/upload_file:")
        return None
    with display.user_errors():
        matrix = load_matrix(data, name=name)
        return run_check(hashlib.sha256(data).hexdigest(), kind, bool(fit), tuple(sorted(values.items())), matrix)
    return None


result = checked(data, name)
if result is not None:
    if result.ok:
        st.success(result.verdict(), icon=":material/check_circle:")
    else:
        st.error(result.verdict(), icon=":material/rule:")
    if result.cause:
        box = st.info if result.cause.harmless else st.warning
        box(f"**Likely cause: {result.cause.name}.** {result.cause.explanation}"
            + (" (An equivalent convention, not a bug, if your model uses it throughout.)" if result.cause.harmless
               else ""), icon=":material/lightbulb:")
        for other in result.causes[1:]:
            st.caption(f"Also reproduces your matrix exactly: **{other.name}**. {other.explanation}")
    elif result.closest and not result.ok:
        st.caption(f"Nothing relviz computes reproduces your matrix exactly, so no cause is named. Partial: "
                   f"**{result.closest.name}** reproduces {result.closest.explains:.1%} of the compared cells, not all "
                   "of them: the closest computed fit, not the cause.")
    if result.difference:
        st.caption(result.difference)
    if result.note:
        st.caption(result.note)

    fig_col, table_col = st.columns([3, 2])
    with fig_col:
        offset = result.settings.q_offset if "q_offset" in used else 0
        labels = kind_of(kind).labels
        display.show_figure(diff_heatmap(result.expected, result.got, result.mismatch, result.compared, q_offset=offset,
                                    title="Your matrix against the reference", third=result.third, labels=labels,
                                    axes=kind_of(kind).axes), key=f"{P}_fig")
        st.caption("**Red**: the cell differs from relviz's reference; pale blue: equal; white: not compared. "
                   f"Hover a cell for {', '.join(labels)}, expected and got.")
    with table_col:
        st.markdown(f"#### First mismatches ({result.mismatches} in all)" if result.first else "#### No mismatches")
        if result.first:
            row, column, third = kind_of(kind).labels
            st.dataframe(pd.DataFrame([{row: m.i, column: m.j, third: m.offset, "expected": m.expected, "got": m.got}
                                       for m in result.first]), hide_index=True, width="stretch")
        st.markdown("**Settings compared**" + (" (found by search)" if result.fitted else ""))
        st.dataframe(pd.DataFrame([{"setting": key, "value": str(value)}
                                   for key, value in result.used_settings().items()] or [{"setting": "—", "value": ""}]),
                     hide_index=True, width="stretch")
        st.download_button("Download the reference (CSV)", lambda: downloads.matrix_to_csv(result.expected),
                           file_name=f"relviz_reference_{kind}.csv", mime="text/csv", key=f"{P}_dl",
                           on_click="ignore")
st.caption("The same check on the command line: `python -m relviz check FILE --kind "
           f"{kind} ...` (exit status 1 on a mismatch, `--json` for a report).")
