"""Ready-made masks. Each compiles the bundled program of the same name (the examples/*.mask
files shipped in compilemask/programs) and binds the given parameters: there is no separate
code path. Call `.specialize(nq=..., ...)` on the result, e.g.

    plan = cm.masks.sliding(256).specialize(nq=4096, device="cuda")
"""
from __future__ import annotations

import functools
from typing import Any

from ._choice import PlanChoice
from ._data_masks import check_batch, from_dense, from_mask_mod, integer_array, row_intervals
from ._layout import strip_order
from ._mask import BoundMask
from ._params import segments
from ._programs import names, program

__all__ = [
    "block_causal_video",
    "causal",
    "chunked_causal",
    "clear",
    "cross_attention",
    "doc_causal",
    "from_dense",
    "from_mask_mod",
    "hstu",
    "names",
    "neighbourhood_2d",
    "padded",
    "per_head_window",
    "prefix_lm",
    "program",
    "row_intervals",
    "shared_prefix",
    "sinks_window",
    "sliding",
    "video_neighbourhood",
]


def _per_sequence(value: Any, count: int) -> Any:
    return [value] * count if isinstance(value, int) else value


def causal() -> BoundMask:
    """Row q sees keys [0, q] (bottom-right aligned when nq != nk)."""
    return program("causal").bind()


def sliding(w: int) -> BoundMask:
    """Causal sliding window: row q sees the w most recent keys, itself included."""
    return program("sliding_window").bind(W=w)


def sinks_window(sinks: int, window: int) -> BoundMask:
    """Attention sinks plus a sliding window (StreamingLLM): row q sees the first `sinks` keys
    and its `window` most recent keys, never a key after itself."""
    return program("sinks_window").bind(S=sinks, W=window)


def per_head_window(windows: Any) -> BoundMask:
    """Causal sliding windows of a length per head: row q of head h sees the windows[h] most
    recent keys, itself included. Specialize with heads=len(windows)."""
    return program("per_head_window").bind(windows=windows)


def chunked_causal(chunk: int) -> BoundMask:
    """Causal attention inside fixed chunks of `chunk` tokens (Llama 4's local layers): row q
    sees the keys of its own chunk up to itself."""
    return program("chunked_causal").bind(C=chunk)


def prefix_lm(prefix: int) -> BoundMask:
    """Prefix LM: every row sees the first `prefix` keys (bidirectional among themselves) and
    is causal after them."""
    return program("prefix_lm").bind(P=prefix)


def block_causal_video(frame: int) -> BoundMask:
    """Frames of `frame` tokens: every token sees all tokens of its own frame and of the frames
    before it."""
    return program("block_causal_video").bind(F=frame)


def cross_attention(query_offsets: Any, key_offsets: Any) -> BoundMask:
    """Packed cross-attention: query sequence i (boundaries `query_offsets`) sees exactly key
    sequence i (boundaries `key_offsets`, as many sequences). Specialize with nq and nk the
    two packed lengths."""
    return program("cross_attention").bind(queries=segments(boundaries=query_offsets),
                                           keys=segments(boundaries=key_offsets))


def padded(lengths: Any, causal: bool = True) -> BoundMask:
    """A right-padded batch: batch row b holds lengths[b] real tokens, then padding. Real rows
    see the real keys (only those up to themselves when `causal`); padding rows see nothing,
    so their output is 0 and they pass no gradient. Specialize with batch=len(lengths) and nq
    (= nk) the padded length; there a negative length raises ValueError (the program's bound)."""
    lengths = integer_array("padded", lengths, "lengths")
    if lengths.ndim != 1:
        raise ValueError(f"padded: lengths must hold one length per batch row, got shape "
                         f"{lengths.shape}")
    return program("padded").bind(lengths=lengths, causal=int(bool(causal))).with_check(
        functools.partial(check_batch, "padded", "lengths", len(lengths)))


def doc_causal(offsets: Any) -> BoundMask:
    """Packed documents, causal inside each. `offsets` are the document boundaries
    [0, end_0, end_1, ...] (cumulative lengths, as in varlen attention)."""
    return program("doc_causal").bind(docs=segments(boundaries=offsets))


def shared_prefix(prompt: int, responses: Any) -> BoundMask:
    """A causal prompt of `prompt` tokens followed by responses of the given lengths; each
    response sees the prompt and itself causally, never a sibling."""
    return program("shared_prefix").bind(
        prompt=(0, prompt), responses=segments(lengths=responses, origin=prompt)
    )


def hstu(offsets: Any, ctx: Any = 0, targets: Any = 1) -> BoundMask:
    """HSTU jagged sequences with boundaries `offsets`; `ctx` contextual tokens first and
    `targets` target tokens last in each sequence (ints, or one value per sequence)."""
    seqs = segments(boundaries=offsets)
    return program("hstu").bind(
        seqs=seqs, ctx=_per_sequence(ctx, len(seqs)), targets=_per_sequence(targets, len(seqs))
    )


def clear(text: int, side: int, radius: int, strip: int | str | None = "auto",
          reorder: bool | None = None) -> BoundMask | PlanChoice:
    """CLEAR: `text` global text tokens, then a side x side image whose tokens see the image
    tokens within Euclidean distance `radius`. `strip` and `reorder` give the image's token
    order (_in_strips): by default the tensors are row-major and each specialization takes the
    row-major plan or the plan in strips `radius` wide, whichever is estimated faster (strips
    at 16K tokens and more for radius 16, row-major at 4K and less)."""
    return _in_strips("clear", {"text": text, "s": side, "r": radius},
                      (text, 1, side, side), radius, strip, reorder)


def neighbourhood_2d(rows: int, cols: int, ry: int, rx: int, shape: str = "box",
                     strip: int | str | None = "auto",
                     reorder: bool | None = None) -> BoundMask | PlanChoice:
    """NATTEN-style neighbourhoods on a rows x cols image: each token sees the tokens in the
    box |dy| <= ry, |dx| <= rx around it (shape="box") or in the ellipse
    dy²/ry² + dx²/rx² < 1 (shape="ellipse"). `strip` and `reorder` as for clear (_in_strips),
    strips rx wide by default."""
    if shape not in ("box", "ellipse"):
        raise ValueError(f"neighbourhood_2d: shape must be 'box' or 'ellipse', got {shape!r}")
    params = {"rows": rows, "cols": cols, "ry": ry, "rx": rx, "shape": int(shape == "ellipse")}
    return _in_strips("neighbourhood_2d", params, (0, 1, rows, cols), rx, strip, reorder)


def video_neighbourhood(frames: int, rows: int, cols: int, rt: int, ry: int, rx: int,
                        strip: int | str | None = "auto",
                        reorder: bool | None = None) -> BoundMask | PlanChoice:
    """Each token of a frames x rows x cols video sees the tokens in the ellipsoid
    dt²/rt² + dy²/ry² + dx²/rx² < 1 around it. `strip` and `reorder` as for clear
    (_in_strips: each frame in strips), strips rx wide by default."""
    params = {"frames": frames, "rows": rows, "cols": cols, "rt": rt, "ry": ry, "rx": rx}
    return _in_strips("video_neighbourhood", params, (0, frames, rows, cols), rx, strip, reorder)


def _in_strips(name: str, params: dict[str, Any], grid: tuple[int, int, int, int],
               auto_width: int, strip: int | str | None,
               reorder: bool | None) -> BoundMask | PlanChoice:
    """Bundled program `name`, whose last parameter `strip` orders the tokens of its grid
    (start, frames, rows, cols) in strips of that many columns (docs/language.md, strip order).
    strip=None: the tensors' grid is row-major. An int strip: the tensors' grid is in that
    strip order; with reorder=True it stays row-major instead, and the plans carry the strip
    order as their token_order, which cm.attention reorders into and back. strip="auto": the
    tensors' grid is row-major, and specialize takes the row-major plan or the plan in strips
    `auto_width` wide with its token order, whichever is estimated faster (PlanChoice)."""
    start, frames, rows, cols = grid
    if strip == "auto":
        if reorder is not None:
            raise ValueError(f"{name}: strip='auto' chooses the token order itself; reorder "
                             "goes with an int strip")
        return PlanChoice(_in_strips(name, params, grid, auto_width, None, None),
                          _in_strips(name, params, grid, auto_width,
                                     max(1, min(auto_width, cols)), True))
    if reorder and strip is None:
        raise ValueError(f"{name}: reorder=True needs a strip width (about the neighbourhood's "
                         "column radius)")
    bound = program(name).bind(**params, strip=cols if strip is None else strip)
    if not reorder:
        return bound
    return bound.with_token_order(
        lambda nq: strip_order(start, rows, cols, strip, nq, frames=frames))
