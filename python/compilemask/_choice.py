"""PlanChoice: the fastest of several masks that mean the same attention on the caller's
tensors, chosen by the cost estimates of compilemask._cost."""
from __future__ import annotations

from typing import Any

from ._cost import estimated_backward_seconds, estimated_forward_seconds
from ._mask import BoundMask
from ._plan import Plan


class PlanChoice:
    """Masks that mean the same attention on the caller's tensors, such as a row-major plan and
    a strip plan carrying its token order (what cm.masks.clear returns by default). specialize
    makes each candidate's plan and returns the one estimated fastest (compilemask._cost; the
    first on a tie). Candidates with a token order need nq == nk and are left out of
    cross-attention shapes."""

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
        costed = [self._costed(candidate, objective, kwargs) for candidate in fitting]
        fastest = min(costed, key=lambda pair: pair[0])[1]
        return fastest if device is None else fastest.to(device)

    @staticmethod
    def _costed(candidate: BoundMask, objective: str, kwargs: dict[str, Any]) -> tuple:
        """(estimated seconds, plan) of one candidate."""
        plan = candidate.specialize(**kwargs)
        seconds = estimated_forward_seconds(plan)
        if objective == "training":  # the backward's work is counted in 64-row halves
            tile_m, tile_n = plan.tile
            # Only the halves' tile counts are read, and they do not depend on the token order:
            # token_order=None spares building and checking the order a second time.
            halves = candidate.specialize(**{**kwargs, "token_order": None,
                                             "tile": (max(16, tile_m // 32 * 16), tile_n)})
            seconds += estimated_backward_seconds(plan, halves)
        return seconds, plan
