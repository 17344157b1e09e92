"""Uploads a plan for cm.attention: the descriptor in host and device memory and the decoded
tile lists of the backward fallback, all made once so that calls need no host work, no host
sync and no allocation of their own (CUDA graph capture)."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ._plan import Plan


def _mark_dynamic(tensor: torch.Tensor, dims: range) -> None:
    # These sizes change with parameter values; marking them keeps torch.compile from
    # recompiling for each new plan of the same shape.
    for d in dims:
        torch._dynamo.maybe_mark_dynamic(tensor, d)


def attach(plan: Plan, device: Any) -> None:
    """Sets plan.device, plan._desc_host, plan._desc_device and plan._tiles = [instance_map
    [batch, heads], key_tile [I, Mt, W], mask_slot [I, Mt, W] (int64), masks [S, tm, tn]
    (bool)] on `device`, which must be a CUDA device."""
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"device must be a CUDA device, got '{device}'")
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    host = torch.from_numpy(np.array(plan.descriptor))
    lists = plan._core.tile_lists()
    tiles = [
        torch.from_numpy(plan._core.instance_map()).to(device, torch.int64),
        torch.from_numpy(lists["key_tile"]).to(device, torch.int64),
        torch.from_numpy(lists["mask_slot"]).to(device, torch.int64),
        torch.from_numpy(lists["masks"]).to(device, torch.bool),
    ]
    _mark_dynamic(host, range(1))
    _mark_dynamic(tiles[1], range(0, 3, 2))
    _mark_dynamic(tiles[2], range(0, 3, 2))
    _mark_dynamic(tiles[3], range(1))
    plan._desc_host = host
    plan._desc_device = host.to(device)
    _mark_dynamic(plan._desc_device, range(1))
    plan._tiles = tiles
    plan.device = device
