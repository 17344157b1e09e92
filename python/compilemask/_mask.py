"""compile(), Mask and BoundMask: the Python face of the mask compiler."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import _core
from ._block_mask import BlockGrid
from ._errors import Diagnostic, MaskError
from ._layout import checked_query_positions
from ._params import convert, integer
from ._plan import Plan


def _read_source(source_or_path: str | os.PathLike) -> tuple[str, str]:
    """(source text, file name for diagnostics). A path-like object, or a one-line string that
    names an existing file, is read; any other string is the program itself."""
    if isinstance(source_or_path, os.PathLike):
        path = Path(source_or_path)
        return path.read_text(), str(path)
    if not isinstance(source_or_path, str):
        raise TypeError(
            f"compile takes mask source text or a path, got {type(source_or_path).__name__}"
        )
    if "\n" not in source_or_path and "{" not in source_or_path and Path(source_or_path).is_file():
        return Path(source_or_path).read_text(), source_or_path
    return source_or_path, "<input>"


def compile(source_or_path: str | os.PathLike) -> "Mask":  # noqa: A001 (the API's name)
    """Compiles a mask program (source text or a path to a .mask file). Raises MaskError with
    every diagnostic (line, column, caret) if it does not compile."""
    return compile_text(*_read_source(source_or_path))


def compile_text(source: str, file: str) -> "Mask":
    """compile() of source text whose diagnostics name `file`."""
    core, diagnostics = _core.compile(source, file)
    if core is None:
        raise MaskError([Diagnostic(*d) for d in diagnostics])
    return Mask(core)


class Mask:
    """A compiled mask program. `specialize` binds parameter values and shapes; it never
    re-parses or recompiles."""

    def __init__(self, core: _core.Mask):
        self._core = core
        self.name: str = core.name
        self.params: dict[str, str] = dict(core.params())  # name -> "int", "int[]", "segment(s)"

    def __repr__(self) -> str:
        params = ", ".join(f"{n}: {t}" for n, t in self.params.items())
        return f"<compilemask.Mask {self.name}({params})>"

    def bind(self, **params: Any) -> "BoundMask":
        """This mask with some parameters fixed; the rest are given to specialize."""
        convert(self.params, self.name, params)  # rejects unknown names and bad kinds now
        return BoundMask(self, params)

    def specialize(
        self,
        *,
        nq: int,
        nk: int | None = None,
        batch: int = 1,
        heads: int = 1,
        tile: tuple[int, int] = (128, 128),
        device: Any = None,
        token_order: Any = None,
        query_positions: Any = None,
        **params: Any,
    ) -> Plan:
        """Binds `params` for an nq x nk problem (nk defaults to nq) over batch x heads masks,
        cut into tile = (tile_m, tile_n) tiles. With `device` (a torch CUDA device), the plan
        is also uploaded for cm.attention. With `token_order` (a permutation of range(nq),
        nq == nk; e.g. compilemask.strip_order), the mask is stated on the tokens in that order:
        position i of its sequence is token token_order[i] of the tensors cm.attention gets,
        which gathers q, k and v into it and returns out, the LSE and the gradients in the
        tensors' own order. With `query_positions` (strictly increasing positions in
        [0, nq); e.g. compilemask.context_parallel_positions), the plan holds only those query
        rows against all nk keys: a context-parallel rank's plan, for its shard of q against
        the gathered k and v (plan.nq is their count; Nq in the program stays nq). Raises
        TypeError or ValueError naming the parameter and the rule when a value does not fit."""
        if query_positions is not None and token_order is not None:
            raise ValueError("specialize: query_positions and token_order do not combine (a "
                             "token order reorders every query row; gather the rank's rows "
                             "in the mask's own order instead)")
        positions = _positions(query_positions)
        core = self._core.specialize(*self._core_args(nq, nk, batch, heads, tile, params),
                                     positions)
        plan = Plan(core, self.name, token_order,
                    None if query_positions is None else positions)
        return plan if device is None else plan.to(device)

    def count_tiles(
        self,
        *,
        nq: int,
        nk: int | None = None,
        batch: int = 1,
        heads: int = 1,
        tile: tuple[int, int] = (128, 128),
        query_positions: Any = None,
        **params: Any,
    ) -> dict[str, int]:
        """The tile counts specialize's plan would report in stats() (instances, tiles,
        full_tiles, partial_tiles, empty_tiles, visible_pairs, computed_pairs), found without
        building its descriptor: what cost estimates need (PlanChoice). A token order does not
        change them; query_positions selects rows as in specialize. Raises as specialize
        does."""
        return self._core.count_tiles(*self._core_args(nq, nk, batch, heads, tile, params),
                                      _positions(query_positions))

    def slices(
        self,
        *,
        nq: int,
        nk: int | None = None,
        batch: int = 1,
        heads: int = 1,
        b: int = 0,
        h: int = 0,
        **params: Any,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The visible pairs of mask (b, h) as attention slices that cover each pair once:
        (q_ranges, k_ranges, attn_type_map), int32 arrays of shapes [S, 2], [S, 2] and [S],
        sorted by (q_begin, k_begin), the arguments of MagiAttention's flex_flash_attn_func and
        magi_attn_flex_key. Row i of a slice of Lq rows sees its whole key range (type 0,
        full), the keys below k_end - Lq + 1 + i (1, causal, aligned at the bottom right),
        those from k_begin + i (2, inverse causal), or both (3, bi-causal). Positions are the
        mask's own (a token order is not applied). Costs O(rows + intervals) and builds no
        descriptor. Raises as specialize does, and IndexError for (b, h) outside
        (batch, heads)."""
        b, h = integer(b, "b"), integer(h, "h")
        for name, index, extent in (("b", b, integer(batch, "batch")),
                                    ("h", h, integer(heads, "heads"))):
            if not 0 <= index < extent:
                raise IndexError(f"{name} = {index} is outside [0, {extent})")
        return self._core.slices(*self._problem_args(nq, nk, batch, heads, params), b, h)

    def block_grid(
        self,
        *,
        nq: int,
        nk: int | None = None,
        batch: int = 1,
        heads: int = 1,
        block: int | tuple[int, int] = 128,
        query_positions: Any = None,
        **params: Any,
    ) -> BlockGrid:
        """The masks on a grid of block = (block_q, block_k) blocks (an int for both; multiples
        of 16 up to 256, as specialize's tile): each block empty, full or partial, and the
        visibility bits of the partial ones (BlockGrid). Positions are the mask's own (a token
        order is not applied); with query_positions, the grid's rows are those positions, as
        in specialize (a context-parallel rank's BlockMask). Costs O(rows + intervals +
        blocks + partial blocks' bits) and builds no descriptor. Raises as specialize does."""
        if hasattr(block, "__index__"):
            block = (block, block)
        block = _tile(block, "block", "(block_q, block_k)")
        args = self._problem_args(nq, nk, batch, heads, params)
        nq, nk, batch, heads = args[-4:]
        positions = _positions(query_positions)
        instance_of, codes, bits = self._core.block_grid(*args, *block, positions)
        rows = nq if query_positions is None else len(positions)
        return BlockGrid(rows, nk, block, instance_of.reshape(batch, heads), codes, bits)

    def block_mask(self, *, device: Any = None, **kwargs: Any) -> Any:
        """block_grid(**kwargs) as a FlexAttention BlockMask on `device` (default: the GPU if
        there is one, else the CPU), for flex_attention(q, k, v, block_mask=...) with any
        score_mod: what create_block_mask(mask_mod, batch, heads, nq, nk, BLOCK_SIZE=block)
        gives for this mask, found without calling a predicate on every pair or compiling one
        per length. Needs PyTorch."""
        return self.block_grid(**kwargs).block_mask(device)

    def _core_args(self, nq: Any, nk: Any, batch: Any, heads: Any, tile: Any,
                   params: dict[str, Any]) -> tuple:
        """The checked arguments of _core.Mask.specialize and count_tiles."""
        return self._problem_args(nq, nk, batch, heads, params) + _tile(tile)

    def _problem_args(self, nq: Any, nk: Any, batch: Any, heads: Any,
                      params: dict[str, Any]) -> tuple:
        """The checked parameters and shape, the arguments every _core.Mask method starts with."""
        ints, arrays, segs = convert(self.params, self.name, params)
        return (ints, arrays, segs, integer(nq, "nq"), integer(nq if nk is None else nk, "nk"),
                integer(batch, "batch"), integer(heads, "heads"))


class BoundMask:
    """A Mask with some parameters already given (what the cm.masks helpers return), and
    optionally a token order made for each specialization (with_token_order) and a check of
    the specialization's arguments (`check(kwargs)` raises for arguments that do not fit the
    bound values, such as arrays of one entry per row and another nq)."""

    def __init__(self, mask: Mask, params: dict[str, Any],
                 token_order: Callable[[int], Any] | None = None,
                 check: Callable[[dict[str, Any]], None] | None = None):
        self.mask = mask
        self.bound = params
        self._token_order = token_order
        self._check = check

    def __repr__(self) -> str:
        order = "" if self._token_order is None else " token_order"
        return f"<compilemask.BoundMask {self.mask.name} bound={sorted(self.bound)}{order}>"

    @property
    def has_token_order(self) -> bool:
        """Whether specialize gives its plans a token order (with_token_order)."""
        return self._token_order is not None

    def with_token_order(self, order_for: Callable[[int], Any]) -> "BoundMask":
        """This mask, specializing with token_order=order_for(nq) unless given one."""
        return BoundMask(self.mask, self.bound, order_for, self._check)

    def with_check(self, check: Callable[[dict[str, Any]], None]) -> "BoundMask":
        """This mask, calling check(kwargs) before each specialize and count_tiles."""
        return BoundMask(self.mask, self.bound, self._token_order, check)

    def specialize(self, **kwargs: Any) -> Plan:
        """Mask.specialize with the bound parameters added (a parameter given again wins)."""
        if self._check is not None:
            self._check(kwargs)
        if self._token_order is not None and "token_order" not in kwargs and "nq" in kwargs:
            kwargs["token_order"] = self._token_order(kwargs["nq"])
        return self.mask.specialize(**{**self.bound, **kwargs})

    def count_tiles(self, **kwargs: Any) -> dict[str, int]:
        """Mask.count_tiles with the bound parameters added (a parameter given again wins)."""
        if self._check is not None:
            self._check(kwargs)
        return self.mask.count_tiles(**{**self.bound, **kwargs})

    def slices(self, **kwargs: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mask.slices with the bound parameters added (a parameter given again wins)."""
        if self._check is not None:
            self._check(kwargs)
        return self.mask.slices(**{**self.bound, **kwargs})

    def block_grid(self, **kwargs: Any) -> BlockGrid:
        """Mask.block_grid with the bound parameters added (a parameter given again wins)."""
        if self._check is not None:
            self._check(kwargs)
        return self.mask.block_grid(**{**self.bound, **kwargs})

    def block_mask(self, *, device: Any = None, **kwargs: Any) -> Any:
        """Mask.block_mask with the bound parameters added (a parameter given again wins)."""
        return self.block_grid(**kwargs).block_mask(device)


def _positions(query_positions: Any) -> np.ndarray:
    """specialize's query_positions as the core takes them: checked, or empty for all rows."""
    if query_positions is None:
        return np.empty(0, dtype=np.int32)
    return checked_query_positions(query_positions)


def _tile(tile: Any, name: str = "tile", parts: str = "(tile_m, tile_n)") -> tuple[int, int]:
    try:
        tile_m, tile_n = tile
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a {parts} pair, got {tile!r}") from None
    return integer(tile_m, f"{name}[0]"), integer(tile_n, f"{name}[1]")
