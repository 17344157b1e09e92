"""PlanChoice: the fastest of several masks that mean the same attention on the caller's
tensors, chosen by the kernel time estimates of include/compilemask/estimate.h."""
from __future__ import annotations

from typing import Any

from . import _core
from ._mask import BoundMask
from ._plan import Plan, estimated_seconds


class PlanChoice:
    """Masks that mean the same attention on the caller's tensors, such as a row-major plan and
    a strip plan carrying its token order (what cm.masks.clear returns by default). specialize
    prices each candidate from its tile counts (Mask.count_tiles, estimate.h), builds
    the plan of the one estimated fastest (the first on a tie) and returns it. Candidates with
    a token order need nq == nk and are left out of cross-attention shapes."""

    OBJECTIVES = ("training", "forward")

    def __init__(self, *candidates: BoundMask):
        if not candidates:
            raise ValueError("PlanChoice needs at least one candidate mask")
        for i, candidate in enumerate(candidates):
            if not isinstance(candidate, BoundMask):
                raise TypeError(f"PlanChoice candidate {i} must be a BoundMask (e.g. from "
                                f"Mask.bind), got {type(candidate).__name__}")
        self.candidates = candidates

    def __repr__(self) -> str:
        return f"<compilemask.PlanChoice of {', '.join(map(repr, self.candidates))}>"

    def specialize(self, *, device: Any = None, objective: str = "training",
                   **kwargs: Any) -> Plan:
        """The fastest candidate's plan for these arguments (BoundMask.specialize's): fastest
        forward + backward (objective="training", the default) or forward alone
        (objective="forward", for inference)."""
        if objective not in self.OBJECTIVES:
            raise ValueError(f"PlanChoice: objective must be 'training' or 'forward', got "
                             f"{objective!r}")
        if "token_order" in kwargs:
            raise TypeError("PlanChoice.specialize takes no token_order: the candidates bring "
                            "theirs; specialize one candidate to give your own")
        nq, nk = kwargs.get("nq"), kwargs.get("nk")
        cross = nk is not None and nk != nq
        fitting = [c for c in self.candidates if not (cross and c.has_token_order)]
        if not fitting:
            raise ValueError(f"PlanChoice: every candidate has a token order, which needs "
                             f"nq == nk, got nq={nq}, nk={nk}")
        fastest = fitting[0] if len(fitting) == 1 else min(
            fitting, key=lambda candidate: self._seconds(candidate, objective, kwargs))
        return fastest.specialize(device=device, **kwargs)

    @staticmethod
    def _seconds(candidate: BoundMask, objective: str, kwargs: dict[str, Any]) -> float:
        """The estimated seconds of one candidate's plan, from its tile counts."""
        tile = kwargs.get("tile", (128, 128))
        counts = candidate.count_tiles(**kwargs)  # checks the arguments first
        halves = None
        if objective == "training":  # the backward's work is counted in 64-row halves
            halves = candidate.count_tiles(**{**kwargs, "tile": _core.backward_halves(*tile)})
        return estimated_seconds(counts, tile, kwargs.get("batch", 1), kwargs.get("heads", 1),
                                 kwargs["nq"], candidate.has_token_order, halves)
