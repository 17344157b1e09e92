"""Ready-made masks. Each compiles the bundled program of the same name (the examples/*.mask
files shipped in compilemask/programs) and binds the given parameters: there is no separate
code path. Call `.specialize(nq=..., ...)` on the result, e.g.

    plan = cm.masks.sliding(256).specialize(nq=4096, device="cuda")
"""
from __future__ import annotations

import atexit
import functools
import sys
from importlib import resources
from typing import Any

import numpy as np

from ._choice import PlanChoice
from ._layout import strip_order
from ._mask import BoundMask, Mask, compile
from ._params import segments


@functools.lru_cache(maxsize=None)
def program(name: str) -> Mask:
    """The bundled program `name` (e.g. "causal", "hstu"), compiled once per process."""
    path = resources.files(__package__) / "programs" / f"{name}.mask"
    if not path.is_file():
        raise ValueError(f"no bundled mask program '{name}' (available: {', '.join(names())})")
    return compile(path.read_text())


# The compiled programs go at exit, before the extension module: nanobind reports objects that
# outlive it as leaks, and where the interpreter tears the cache down late (a pytest session
# whose conftest imports compilemask, on Python 3.12) all eight did.
atexit.register(program.cache_clear)


def names() -> list[str]:
    """The names of the bundled programs."""
    folder = resources.files(__package__) / "programs"
    return sorted(p.name[: -len(".mask")] for p in folder.iterdir() if p.name.endswith(".mask"))


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
    (= nk) the padded length. A negative length raises ValueError."""
    lengths = _integer_array("padded", lengths, "lengths")
    if lengths.ndim != 1:
        raise ValueError(f"padded: lengths must hold one length per batch row, got shape "
                         f"{lengths.shape}")
    if (lengths < 0).any():
        raise ValueError(f"padded: lengths must not be negative, got {lengths[lengths < 0][0]}")
    return program("padded").bind(lengths=lengths, causal=int(bool(causal))).with_check(
        functools.partial(_check_batch, "padded", "lengths", len(lengths)))


def row_intervals(starts: Any, ends: Any, starts2: Any = None, ends2: Any = None) -> BoundMask:
    """Any mask with one interval of keys per query row, or two, from arrays (FlashMask-style
    bounds, computed by the caller): row q sees keys [starts[q], ends[q]), and with the second
    pair also [starts2[q], ends2[q]); with arrays of shape [batch, nq], row q of batch row b
    sees [starts[b, q], ends[b, q]) (and the second pair's). An interval whose end is not past
    its start is empty, and keys are clipped to [0, nk). Specialize with nq equal to the
    arrays' last dimension (and batch to their first); other shapes raise ValueError."""
    if (starts2 is None) != (ends2 is None):
        raise ValueError("row_intervals: give starts2 and ends2 together, or neither")
    names = ["starts", "ends"] + (["starts2", "ends2"] if starts2 is not None else [])
    bounds = [_integer_array("row_intervals", x, name)
              for x, name in zip((starts, ends, starts2, ends2), names)]
    shapes = {x.shape for x in bounds}
    if len(shapes) != 1 or bounds[0].ndim not in (1, 2) or bounds[0].size == 0:
        raise ValueError(f"row_intervals: {', '.join(names)} must have one shape, [nq] or "
                         f"[batch, nq], got {', '.join(str(x.shape) for x in bounds)}")
    return _row_intervals("row_intervals", bounds)


def from_dense(visible: Any) -> BoundMask:
    """The mask of a dense boolean array, [nq, nk] or [batch, nq, nk] (True: visible), such as
    an SDPA attn_mask, whose every row sees at most two separate runs of keys. It reads the
    array a few times (O(nq * nk)) and keeps only the runs' bounds (row_intervals); specialize
    with its nq, nk (and batch). A row that sees three or more runs raises ValueError naming
    it: such masks need a program (docs/language.md)."""
    # A torch tensor stays on its device: only the bounds come to the host.
    xp = sys.modules["torch"] if hasattr(visible, "cpu") else np
    dense = visible if xp is not np else np.asarray(visible)
    if str(dense.dtype) not in ("bool", "torch.bool") or dense.ndim not in (2, 3) or \
            0 in dense.shape:
        raise ValueError(f"from_dense: expected a boolean array [nq, nk] or [batch, nq, nk], "
                         f"got dtype {dense.dtype} and shape {tuple(dense.shape)}")
    nk = dense.shape[-1]
    rows = dense.reshape(-1, nk)
    # Numpy: a few million cells at a time, so that the temporaries stay in cache; torch: large
    # blocks, few launches.
    step = max(1, (1 << (22 if xp is np else 27)) // nk)
    parts = [_row_runs(xp, rows[r:r + step]) for r in range(0, rows.shape[0], step)]
    starts, ends, starts2, ends2, split = (
        np.concatenate([part[i] for part in parts]).reshape(dense.shape[:-1]) for i in range(5))
    bounds, second = [starts, ends, starts2, ends2], ends2 > starts2
    if split.any():
        at = tuple(int(i) for i in np.argwhere(split)[0])
        where = f"row {at[-1]}" + (f" of batch row {at[0]}" if len(at) == 2 else "")
        raise ValueError(f"from_dense: {where} sees {_runs(_host(dense[at]))} separate runs of "
                         f"keys; from_dense takes at most two per row (write a program for "
                         f"more)")
    return _row_intervals("from_dense", bounds if second.any() else bounds[:2], nk)


def _row_runs(xp: Any, rows: Any) -> list[np.ndarray]:
    """For each row of the boolean [rows, nk] array `rows` (numpy, or torch on any device with
    xp = torch): the bounds of its first and second runs of True (starts, ends, starts2, ends2;
    empty runs as 0, 0) and whether it has more than two, as host arrays."""
    nk = rows.shape[-1]
    cols = xp.arange(nk) if xp is np else xp.arange(nk, device=rows.device)

    def first(x):  # the first True along the last axis (torch's argmax takes no bool)
        return (x if xp is np else x.to(xp.uint8)).argmax(-1)

    seen = rows.any(-1)
    starts = xp.where(seen, first(rows), 0)
    gap = ~rows & (cols >= starts[:, None])
    ends = xp.where(seen, xp.where(gap.any(-1), first(gap), nk), 0)
    rest = rows & (cols >= ends[:, None])
    second = rest.any(-1)
    starts2 = xp.where(second, first(rest), 0)
    ends2 = xp.where(second, nk - first(xp.flip(rows, (-1,))), 0)
    split = rows.sum(-1, dtype=xp.int64) != (ends - starts) + (ends2 - starts2)
    return [_host(x) for x in (starts, ends, starts2, ends2, split)]


def _host(array: Any) -> np.ndarray:
    """A numpy copy of a torch tensor (any device), or the numpy array itself."""
    return array.cpu().numpy() if hasattr(array, "cpu") else np.asarray(array)


def _runs(row: np.ndarray) -> int:
    """How many separate runs of True `row` holds."""
    return int(np.count_nonzero(row[1:] & ~row[:-1]) + row[0])


def _row_intervals(helper: str, bounds: list[np.ndarray], nk: int | None = None) -> BoundMask:
    """The program row_intervals (bounds: starts, ends) or row_intervals_2 (starts, ends,
    starts2, ends2) bound to the bounds ([nq] or [batch, nq] each, checked), checking at
    specialize that nq (and batch, and nk if given) match them."""
    shape = bounds[0].shape

    def check(kwargs: dict[str, Any]) -> None:
        rows = shape[-1]
        if kwargs.get("nq") != rows:
            raise ValueError(f"{helper}: the bounds hold {rows} rows, so nq must be {rows}, "
                             f"got {kwargs.get('nq')}")
        if nk is not None and kwargs.get("nk", rows) != nk:
            raise ValueError(f"{helper}: the mask has {nk} keys, so nk must be {nk}, got "
                             f"{kwargs.get('nk', rows)}")
        if len(shape) == 2:
            _check_batch(helper, "bounds", shape[0], kwargs)

    names = ("starts", "ends", "starts2", "ends2")
    name = "row_intervals" if len(bounds) == 2 else "row_intervals_2"
    return program(name).bind(**{n: x.reshape(-1) for n, x in zip(names, bounds)}).with_check(
        check)


def _check_batch(helper: str, what: str, batches: int, kwargs: dict[str, Any]) -> None:
    """Raises ValueError unless specialize's batch (default 1) is `batches`."""
    if kwargs.get("batch", 1) != batches:
        raise ValueError(f"{helper}: the {what} hold {batches} batch rows, so batch must be "
                         f"{batches}, got {kwargs.get('batch', 1)}")


def _integer_array(helper: str, values: Any, name: str) -> np.ndarray:
    """`values` (a list, numpy array or torch tensor) as an int64 numpy array; raises TypeError
    naming the helper and the argument for other element types."""
    array = np.asarray(values.cpu() if hasattr(values, "cpu") else values)
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{helper}: {name} must be integers, got dtype {array.dtype}")
    return array.astype(np.int64)


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
