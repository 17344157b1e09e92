"""Trains a small HSTU-style transformer with CompileMask attention on synthetic jagged user
sequences, on one GPU in well under a minute, and checks that the loss goes down.

Each step packs random-length user sequences into T tokens, one jagged [T, H, D] batch. A
sequence starts with CTX context tokens (the user's "taste" t) followed by items that follow
item[i+1] = (item[i] + t) mod V, and ends with TARGETS target items. The model predicts every
next item; doing so needs attention to the context (to learn t) and to the previous item, which
is what the hstu mask allows. A new plan is specialized for every step's lengths: the mask is
compiled once and only parameter values change.

    python examples/train_hstu.py [--steps 300] [--tokens 4096]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import compilemask as cm

VOCAB, TASTES, CTX, TARGETS, MAX_LEN = 512, 16, 2, 4, 512


def make_batch(rng: np.random.Generator, tokens: int, device: torch.device):
    """(items, positions, targets, loss mask, sequence offsets) of one packed batch."""
    shortest = CTX + TARGETS + 2
    lengths = []
    while sum(lengths) < tokens:  # below MAX_LEN even after a tail is folded in
        lengths.append(int(min(rng.integers(32, MAX_LEN - shortest), tokens - sum(lengths))))
    if lengths[-1] < shortest:  # fold a too-short tail into the previous sequence
        tail = lengths.pop()
        lengths[-1] += tail
    items, positions, predict = [], [], []
    for length in lengths:
        taste = int(rng.integers(1, TASTES))
        start = int(rng.integers(0, VOCAB - TASTES))
        history = (start + taste * np.arange(length - CTX)) % (VOCAB - TASTES) + TASTES
        items += [taste] * CTX + history.tolist()
        positions += list(range(length))
        predict += [False] * (CTX - 1) + [True] * (length - CTX) + [False]
    items = torch.tensor(items, device=device)
    targets = torch.roll(items, -1)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return (items, torch.tensor(positions, device=device), targets,
            torch.tensor(predict, device=device), offsets)


class Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor, plan: cm.Plan) -> torch.Tensor:
        tokens, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(tokens, 3, self.heads, -1).unbind(1)
        attended = cm.attention(q.contiguous(), k.contiguous(), v.contiguous(), plan)  # [T, H, D]
        x = x + self.proj(attended.reshape(tokens, width))
        return x + self.mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self, width: int = 128, heads: int = 2, layers: int = 2):
        super().__init__()
        self.items = nn.Embedding(VOCAB, width)
        self.positions = nn.Embedding(MAX_LEN, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.head = nn.Linear(width, VOCAB)

    def forward(self, items, positions, plan):
        x = self.items(items) + self.positions(positions)
        for block in self.blocks:
            x = block(x, plan)
        return self.head(x)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--tokens", type=int, default=4096)
    args = parser.parse_args()
    device = torch.device("cuda")
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = Model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    mask = cm.masks.program("hstu")  # compiled once; every step only binds new values
    started = time.perf_counter()
    losses = []
    for step in range(args.steps):
        items, positions, targets, predict, offsets = make_batch(rng, args.tokens, device)
        count = len(offsets) - 1
        plan = mask.specialize(nq=args.tokens, seqs=offsets, ctx=[CTX] * count,
                               targets=[TARGETS] * count, device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(items, positions, plan)
        loss = F.cross_entropy(logits.float()[predict], targets[predict])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 25 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {loss.item():.4f}  sequences {count}  "
                  f"density {plan.stats()['density']:.4f}  {time.perf_counter() - started:.1f} s",
                  flush=True)
    first, last = np.mean(losses[:10]), np.mean(losses[-10:])
    print(f"loss {first:.4f} -> {last:.4f} in {time.perf_counter() - started:.1f} s")
    if not last < 0.5 * first:
        print("FAIL: the loss did not fall to half its starting value")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
