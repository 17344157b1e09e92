"""The attention backward (dq, dk, dv) in torch ops, restricted to the plan's visible tiles.

There is no GPU backward kernel yet (issue 4), so this is what autograd runs. It is exact
attention backward, not an approximation: for each chunk of query tiles it gathers the key
tiles the descriptor lists for them (the padded tile lists decoded once per plan, see
python/src/tile_lists.h), recomputes P = exp(scale * Q Kᵀ - LSE) from the forward's LSE under
the tile masks, and forms

    dV = Pᵀ dO,  dS = P ∘ (dO Vᵀ - rowsum(dO ∘ O) + dLSE),  dQ = scale dS K,  dK = scale dSᵀ Q

in float32, scattering dK and dV back to their key tiles (summed over the query heads of a
GQA group). Work and memory scale with the visible tiles, not with nq x nk, but it runs at
PyTorch-op speed, far below a fused kernel. No host sync: every shape comes from the plan.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

# Elements of one [chunk, tile_m, width * tile_n] score block per (batch, head); a chunk's
# temporaries (S, P, dP, dS, masks) are a few times this in float32.
_CHUNK_ELEMENTS = 1 << 25


def _rows(offsets: Tensor, n: int) -> Tensor:
    """[B, n] row indices of each packed sequence."""
    return offsets.long()[:, None] + torch.arange(n, device=offsets.device)


def _to_bhsd(x: Tensor, rows: Optional[Tensor], heads_first: bool) -> Tensor:
    """x as float32 [B, H, S, D] (a view where possible)."""
    if x.dim() == 3:
        x = x.unsqueeze(0) if rows is None else x[rows]  # [B, S, H, D]
        heads_first = False
    return (x if heads_first else x.transpose(1, 2)).float()


def _lse_to_bhs(lse: Tensor, rows: Optional[Tensor]) -> Tensor:
    if lse.dim() == 3:
        return lse
    if rows is None:
        return lse.unsqueeze(0)
    return lse[:, rows].transpose(0, 1)  # [H, B, n] -> [B, H, n]


def _from_bhsd(g: Tensor, like: Tensor, rows: Optional[Tensor], heads_first: bool) -> Tensor:
    """The gradient g [B, H, S, D] in the layout and dtype of `like`."""
    if like.dim() == 4:
        return (g if heads_first else g.transpose(1, 2)).to(like.dtype)
    g = g.transpose(1, 2)  # [B, S, H, D]
    if rows is None:
        return g[0].to(like.dtype)
    flat = torch.zeros(like.shape, dtype=torch.float32, device=like.device)
    flat.index_add_(0, rows.reshape(-1), g.reshape(-1, *like.shape[1:]))
    return flat.to(like.dtype)


def tile_backward(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, dout: Tensor,
                  dlse: Optional[Tensor], tiles: list[Tensor], q_offsets: Optional[Tensor],
                  k_offsets: Optional[Tensor], heads_first: bool, nq: int, nk: int,
                  scale: float) -> tuple[Tensor, Tensor, Tensor]:
    """(dq, dk, dv) in the layouts and dtypes of q, k, v. Arguments as for
    compilemask::attention_forward, plus its outputs (out, lse) and their gradients."""
    instance_map, key_tile, mask_slot, masks = tiles
    q_rows = None if q_offsets is None else _rows(q_offsets, nq)
    k_rows = None if k_offsets is None else _rows(k_offsets, nk)
    Q, dO, O = (_to_bhsd(x, q_rows, heads_first) for x in (q, dout, out))
    K, V = (_to_bhsd(x, k_rows, heads_first) for x in (k, v))
    batch, heads, _, dim = Q.shape
    heads_kv = K.shape[1]
    tile_m, tile_n = masks.shape[1], masks.shape[2]
    q_tiles = key_tile.shape[1]
    k_tiles = -(-nk // tile_n)
    dev = Q.device

    # Padding: query rows past nq get LSE = +inf (P = 0); key tile k_tiles is an all-zero
    # dummy that padding entries of the tile lists point at.
    pad_q = q_tiles * tile_m - nq
    Q, dO = (F.pad(x, (0, 0, 0, pad_q)) for x in (Q, dO))
    K, V = (F.pad(x, (0, 0, 0, (k_tiles + 1) * tile_n - nk)).view(
        batch, heads_kv, k_tiles + 1, tile_n, dim) for x in (K, V))
    lse = _lse_to_bhs(lse, q_rows)
    lse = torch.where(lse == float("-inf"), float("inf"), lse)  # rows that see no key: P = 0
    lse = F.pad(lse, (0, pad_q), value=float("inf"))
    delta = (dO[:, :, :nq] * O).sum(-1)
    if dlse is not None:
        delta = delta - _lse_to_bhs(dlse, q_rows).float()
    delta = F.pad(delta, (0, pad_q))
    key_valid = (torch.arange((k_tiles + 1) * tile_n, device=dev) < nk).view(k_tiles + 1, tile_n)

    instances = instance_map.expand(batch, heads)  # descriptors of batch or heads 1 broadcast
    key_tile, mask_slot = key_tile[instances], mask_slot[instances]  # [B, H, Mt, W]
    b_index = torch.arange(batch, device=dev)[:, None, None, None]
    kv_index = (torch.arange(heads, device=dev) // (heads // heads_kv))[None, :, None, None]
    dK = torch.zeros(batch * heads_kv * (k_tiles + 1), tile_n, dim, device=dev)
    dV = torch.zeros_like(dK)

    chunk = max(1, _CHUNK_ELEMENTS // (batch * heads * tile_m * tile_n * max(k_tiles, 1)))
    dQ_chunks = []
    for m0 in range(0, q_tiles, chunk):
        m1 = min(q_tiles, m0 + chunk)
        kt = key_tile[:, :, m0:m1]  # [B, H, c, W]
        c, width = m1 - m0, kt.shape[-1]
        Kg = K[b_index, kv_index, kt].reshape(batch, heads, c, width * tile_n, dim)
        Vg = V[b_index, kv_index, kt].reshape(batch, heads, c, width * tile_n, dim)
        visible = masks[mask_slot[:, :, m0:m1]] & key_valid[kt][..., None, :]
        visible = visible.permute(0, 1, 2, 4, 3, 5).reshape(batch, heads, c, tile_m, -1)
        rows = slice(m0 * tile_m, m1 * tile_m)
        Qc = Q[:, :, rows].reshape(batch, heads, c, tile_m, dim)
        dOc = dO[:, :, rows].reshape(batch, heads, c, tile_m, dim)
        S = torch.where(visible, Qc @ Kg.transpose(-1, -2) * scale, float("-inf"))
        P = torch.exp(S - lse[:, :, rows].reshape(batch, heads, c, tile_m, 1))
        dS = P * (dOc @ Vg.transpose(-1, -2) - delta[:, :, rows].reshape(batch, heads, c, tile_m, 1))
        dQ_chunks.append((dS @ Kg * scale).reshape(batch, heads, c * tile_m, dim))
        target = ((b_index * heads_kv + kv_index) * (k_tiles + 1) + kt).reshape(-1)
        dK.index_add_(0, target, (dS.transpose(-1, -2) @ Qc * scale).reshape(-1, tile_n, dim))
        dV.index_add_(0, target, (P.transpose(-1, -2) @ dOc).reshape(-1, tile_n, dim))

    dQ = torch.cat(dQ_chunks, dim=2)[:, :, :nq]
    dK, dV = (x.view(batch, heads_kv, (k_tiles + 1) * tile_n, dim)[:, :, :nk] for x in (dK, dV))
    return (_from_bhsd(dQ, q, q_rows, heads_first), _from_bhsd(dK, k, k_rows, heads_first),
            _from_bhsd(dV, v, k_rows, heads_first))
