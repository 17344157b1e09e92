"""Ready-made masks. Each compiles the bundled program of the same name (the examples/*.mask
files shipped in compilemask/programs) and binds the given parameters: there is no separate
code path. Call `.specialize(nq=..., ...)` on the result, e.g.

    plan = cm.masks.sliding(256).specialize(nq=4096, device="cuda")
"""
from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from ._layout import strip_order
from ._mask import BoundMask, Mask, PlanChoice, compile
from ._params import segments


@functools.lru_cache(maxsize=None)
def program(name: str) -> Mask:
    """The bundled program `name` (e.g. "causal", "hstu"), compiled once per process."""
    path = resources.files(__package__) / "programs" / f"{name}.mask"
    if not path.is_file():
        raise ValueError(f"no bundled mask program '{name}' (available: {', '.join(names())})")
    return compile(path.read_text())


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
    tokens within Euclidean distance `radius`. The tensors' image tokens are row-major (strip
    None), or in strips of `strip` columns; strips about `radius` wide compute about half the
    tiles. With an int strip and reorder=True the tensors keep their row-major image: the plans
    get the strip order as their token_order, and cm.attention reorders into it and back
    (compilemask.strip_order). With strip="auto" (the default) the tensors are row-major and
    each specialization takes the row-major plan or the plan in strips `radius` wide with its
    token order, whichever is estimated faster (PlanChoice): strips at 16K tokens and more for
    radius 16, row-major at 4K and less."""
    if strip == "auto":
        if reorder is not None:
            raise ValueError("clear: strip='auto' chooses the token order itself; reorder "
                             "goes with an int strip")
        return PlanChoice(clear(text, side, radius, strip=None),
                          clear(text, side, radius, strip=max(1, min(radius, side)),
                                reorder=True))
    if reorder and strip is None:
        raise ValueError("clear: reorder=True needs a strip width (strip=16 suits radius 16)")
    bound = program("clear").bind(text=text, s=side, r=radius,
                                  strip=side if strip is None else strip)
    if not reorder:
        return bound
    return bound.with_token_order(lambda nq: strip_order(text, side, side, strip, nq))
