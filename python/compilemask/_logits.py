"""The logit arguments that cm.attention and cm.reference_attention share: the softmax scale and
the soft cap."""
from __future__ import annotations

import math
import numbers
from typing import Any


def check_logit_factors(scale: Any, softcap: Any) -> None:
    """Raises ValueError unless scale and softcap are each None or a finite real number > 0
    (Python or numpy numbers; not bools)."""
    for name, value in (("scale", scale), ("softcap", softcap)):
        if value is None:
            continue
        if (isinstance(value, bool) or not isinstance(value, numbers.Real)
                or not (math.isfinite(value) and value > 0)):
            raise ValueError(f"{name} must be None or a finite number > 0, got {value!r}")
