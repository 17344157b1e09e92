"""Converts mask parameter values given from Python (ints, lists, numpy arrays, torch tensors,
segment lists) into the int64 arrays the core takes, checked against the declared types."""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _core


@dataclass(frozen=True)
class Segments:
    """Disjoint, sorted half-open token ranges [starts[i], ends[i])."""

    starts: np.ndarray
    ends: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    def __repr__(self) -> str:
        pairs = ", ".join(f"[{s}, {e})" for s, e in zip(self.starts.tolist(), self.ends.tolist()))
        return f"cm.segments({pairs})"


def _is_torch_tensor(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def int_array(value: Any, what: str, ndim: int = 1) -> np.ndarray:
    """`value` as a C-contiguous int64 array of `ndim` dimensions; TypeError or ValueError naming
    `what` otherwise. Torch tensors are copied to the host."""
    if _is_torch_tensor(value):
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.size == 0 and array.dtype.kind in "fO":
        array = array.astype(np.int64)
    if array.dtype.kind not in "iu":
        raise TypeError(f"{what} must hold integers, got dtype {array.dtype}")
    if array.ndim != ndim:
        raise ValueError(f"{what} must be {ndim}-D, got shape {array.shape}")
    return np.ascontiguousarray(array, dtype=np.int64)


def segments(
    lengths: Any = None,
    *,
    boundaries: Any = None,
    starts: Any = None,
    ends: Any = None,
    origin: int = 0,
) -> Segments:
    """A segment list from exactly one of: `lengths` (consecutive, from `origin`), `boundaries`
    ([b0, b1, ...] gives [b0, b1), [b1, b2), ...; e.g. cumulative sequence offsets) or
    `starts` with `ends`."""
    given = [lengths is not None, boundaries is not None, starts is not None or ends is not None]
    if sum(given) != 1:
        raise TypeError("cm.segments takes exactly one of lengths=, boundaries= or starts=/ends=")
    if lengths is not None:
        s, e = _core.segments_from_lengths(int_array(lengths, "lengths"), operator.index(origin))
    elif boundaries is not None:
        s, e = _core.segments_from_boundaries(int_array(boundaries, "boundaries"))
    else:
        if starts is None or ends is None:
            raise TypeError("cm.segments needs both starts= and ends=")
        s, e = int_array(starts, "starts"), int_array(ends, "ends")
        if s.shape != e.shape:
            raise ValueError(f"starts and ends differ in length ({len(s)} and {len(e)})")
    return Segments(s, e)


def _to_segments(value: Any, name: str) -> Segments:
    if isinstance(value, Segments):
        return value
    array = int_array(value, f"parameter '{name}'", np.ndim(_host(value)))
    if array.ndim == 1:
        return segments(boundaries=array)
    if array.ndim == 2 and array.shape[1] == 2:
        return Segments(np.ascontiguousarray(array[:, 0]), np.ascontiguousarray(array[:, 1]))
    raise ValueError(
        f"parameter '{name}' (segments) must be boundaries [b0, b1, ...], (start, end) pairs "
        f"of shape [n, 2] or cm.segments(...), got shape {array.shape}"
    )


def integer(value: Any, name: str) -> int:
    """`value` as an int the core's int64 takes; TypeError naming `name` for a bool or anything
    without __index__, ValueError past int64."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    value = operator.index(value)
    if not -2**63 <= value < 2**63:
        raise ValueError(f"{name} = {value} is outside the int64 range")
    return value


def _host(value: Any) -> Any:
    return value.detach().cpu().numpy() if _is_torch_tensor(value) else value


def _to_int(value: Any, name: str) -> int:
    value = _host(value)
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"parameter '{name}' (int) must be an integer, got a bool")
    try:
        return operator.index(value.item() if isinstance(value, np.ndarray) else value)
    except (TypeError, ValueError):
        raise TypeError(
            f"parameter '{name}' (int) must be an integer, got {type(value).__name__}"
        ) from None


def convert(declared: dict[str, str], mask_name: str, values: dict[str, Any]):
    """Sorts `values` by declared type into (ints, arrays, segments) for _core.Mask.specialize.
    Raises TypeError for unknown names and values of the wrong kind; the core reports missing
    parameters and out-of-range values."""
    ints: dict[str, int] = {}
    arrays: dict[str, np.ndarray] = {}
    segs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, value in values.items():
        kind = declared.get(name)
        if kind is None:
            known = ", ".join(f"{n}: {t}" for n, t in declared.items()) or "none"
            raise TypeError(f"mask '{mask_name}' has no parameter '{name}' (parameters: {known})")
        if kind == "int":
            ints[name] = _to_int(value, name)
        elif kind == "int[]":
            arrays[name] = int_array(value, f"parameter '{name}' (int[])")
        elif kind == "segments":
            s = _to_segments(value, name)
            segs[name] = (s.starts, s.ends)
        elif kind == "segment":
            if isinstance(value, Segments):
                s = value
            else:
                pair = int_array(value, f"parameter '{name}' (segment, a (start, end) pair)")
                if pair.shape != (2,):
                    raise ValueError(f"parameter '{name}' (segment) must be one (start, end) pair")
                s = Segments(pair[:1].copy(), pair[1:].copy())
            segs[name] = (s.starts, s.ends)
        else:
            raise TypeError(f"parameter '{name}' has a type the bindings do not know: {kind}")
    return ints, arrays, segs
