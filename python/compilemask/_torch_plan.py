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
    host = _pinned(np.array(plan.descriptor))
    _mark_dynamic(host)
    plan._desc_host = host
    plan._desc_device = _upload(host, device)
    _mark_dynamic(plan._desc_device)
    if plan.token_order is not None:
        order = plan.token_order.astype(np.int32)
        plan._order_device = _upload(_pinned(order), device)
        plan._inverse_device = _upload(_pinned(np.argsort(order).astype(np.int32)), device)
    plan.device = device


def _pinned(array: np.ndarray) -> torch.Tensor:
    """`array` copied into page-locked host memory, which a copy to the GPU can read without
    the host waiting for it."""
    return torch.from_numpy(array).pin_memory()


def _upload(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`host` (pinned) copied to `device`, queued on the device's current stream: the host goes
    on at once instead of waiting for the GPU work queued before the copy, so a plan made each
    training step does not stall the step's pipeline. Kernels queued after it on that stream see
    the data; torch's pinned-memory allocator keeps `host` until the copy is done."""
    with torch.cuda.device(device):
        return host.to(device, non_blocking=True)
