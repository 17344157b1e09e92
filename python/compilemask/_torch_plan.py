"""Uploads a plan for cm.attention: the descriptor in host and device memory, made once so that
calls need no host work, no host sync and no allocation of their own (CUDA graph capture)."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ._plan import Plan


def _mark_dynamic(tensor: torch.Tensor) -> None:
    # The descriptor's size changes with parameter values; marking it keeps torch.compile
    # from recompiling for each new plan of the same shape.
    torch._dynamo.maybe_mark_dynamic(tensor, 0)


def attach(plan: Plan, device: Any) -> None:
    """Sets plan.device, plan._desc_host (CPU) and plan._desc_device (uint8 descriptor bytes) on
    `device`, which must be a CUDA device, and with a token order plan._order_device and
    plan._inverse_device (int32)."""
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"device must be a CUDA device, got '{device}'")
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    host = torch.from_numpy(np.array(plan.descriptor))
    _mark_dynamic(host)
    plan._desc_host = host
    plan._desc_device = host.to(device)
    _mark_dynamic(plan._desc_device)
    if plan.token_order is not None:
        order = torch.from_numpy(plan.token_order.astype(np.int32))
        plan._order_device = order.to(device)
        plan._inverse_device = torch.argsort(order).to(torch.int32).to(device)
    plan.device = device
