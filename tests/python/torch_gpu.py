"""Shared setup of the GPU tests of cm.attention (the test_torch_*_gpu.py modules and
test_torch_gpu.py). Importing it skips the importing module without torch, a CUDA device, an
sm_90 (Hopper) GPU or a build with the CUDA kernels. Then: the float64 dense reference and the
error rule the kernels are checked by, and the masks the tests sweep."""
from __future__ import annotations

import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
import compilemask as cm  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if torch.cuda.get_device_capability() < (9, 0):
    pytest.skip("the kernels need an sm_90 (Hopper) GPU", allow_module_level=True)
if not cm.cuda_available():
    pytest.skip("compilemask was built without the CUDA kernels", allow_module_level=True)

DEVICE = torch.device("cuda", torch.cuda.current_device())


def offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).tolist()


def hstu(n, lengths, ctx=4, targets=3):
    assert sum(lengths) == n
    return cm.masks.hstu(offsets(lengths), ctx=ctx, targets=targets)


MASKS = {
    "causal": lambda n: cm.masks.causal(),
    "sliding": lambda n: cm.masks.sliding(97),
    "doc_causal": lambda n: cm.masks.doc_causal(offsets([n // 3, n // 2, n - n // 3 - n // 2])),
    "hstu": lambda n: hstu(n, [n // 4, n // 4, n - 2 * (n // 4)]),
    "shared_prefix": lambda n: cm.masks.shared_prefix(n // 4, [n // 4, n // 4, n - 3 * (n // 4)]),
    "clear": lambda n: cm.masks.clear(n - 20 * 20, 20, 5, strip=None),
    "clear_strips": lambda n: cm.masks.clear(n - 20 * 20, 20, 5, strip=6),
    "neighbourhood_2d": lambda n: cm.masks.neighbourhood_2d(20, n // 20, 3, 4, "ellipse",
                                                            strip=None),
    "sinks_window": lambda n: cm.masks.sinks_window(4, 97),
    "chunked_causal": lambda n: cm.masks.chunked_causal(200),
    "prefix_lm": lambda n: cm.masks.prefix_lm(n // 5),
    "block_causal_video": lambda n: cm.masks.block_causal_video(n // 7),
    "row_intervals": lambda n: cm.masks.row_intervals(*random_bounds(n)),
}


def random_bounds(n):
    """Key intervals for n rows: some empty, some reaching past either end, the rest anywhere."""
    rng = np.random.default_rng(n)
    starts = rng.integers(-50, n, size=n)
    return starts, starts + rng.integers(-10, 300, size=n)


def reference(q, k, v, visible, scale, dout=None, dlse=None, dtype=torch.float64, softcap=None,
              sinks=None, alibi_slopes=None):
    """Dense attention in [B, H, S, D] computed in `dtype` with autograd, the logits capped at
    softcap * tanh(logit / softcap) when softcap is set, then with alibi_slopes ([H]) biased by
    -slope * |i + Nk - Nq - j|; visible [Bm, Hm, Nq, Nk] broadcasts.
    sinks ([H], None for none) adds a key of that logit and value 0 to every row of each head.
    Returns out, lse (-inf where a row sees no key and no sink) and the gradients dq, dk, dv
    and dsinks of sum(out * dout) + sum(lse * dlse) over the rows whose LSE is finite (None
    without dout; dsinks None without sinks)."""
    grad = dout is not None
    q, k, v = (x.detach().to(dtype).requires_grad_(grad) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    kh, vh = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    logits = scale * q @ kh.transpose(-1, -2)
    if softcap:
        logits = softcap * torch.tanh(logits / softcap)
    if alibi_slopes is not None:
        nq, nk = logits.shape[-2:]
        rows = torch.arange(nq, device=logits.device)[:, None] + nk - nq
        distance = (rows - torch.arange(nk, device=logits.device)[None, :]).abs().to(dtype)
        logits = logits - alibi_slopes.to(dtype)[None, :, None, None] * distance
    visible = visible.expand(logits.shape)
    if sinks is not None:  # one more key per head: always seen, its logit the sink, its value 0
        sinks = sinks.detach().to(dtype).requires_grad_(grad)
        column = sinks[None, :, None, None].expand(*logits.shape[:3], 1)
        logits = torch.cat([logits, column], -1)
        visible = torch.cat([visible, torch.isfinite(column)], -1)
        vh = torch.cat([vh, vh.new_zeros(*vh.shape[:2], 1, vh.shape[-1])], -2)
    seen = visible.any(-1, keepdim=True)
    s = torch.where(visible, logits, float("-inf"))
    s = torch.where(seen, s, 0)  # rows that see nothing: finite here, cut off below
    lse = torch.logsumexp(s, -1, keepdim=True)
    out = torch.where(visible, torch.exp(s - lse), 0) @ vh
    if grad:
        outputs, grads = [out], [dout.to(dtype)]
        if dlse is not None:
            outputs.append(torch.where(seen, lse, 0)[..., 0])
            grads.append(dlse.to(dtype))
        torch.autograd.backward(outputs, grads)
    lse = torch.where(seen, lse, float("-inf"))[..., 0]
    dsinks = None if sinks is None else sinks.grad
    return out.detach(), lse.detach(), q.grad, k.grad, v.grad, dsinks


def visible_of(plan):
    masks = [[torch.from_numpy(plan.to_dense(b, h)) for h in range(plan.heads)]
             for b in range(plan.batch)]
    return torch.stack([torch.stack(row) for row in masks]).to(DEVICE)


def check_against_references(got, q, k, v, visible, scale, dout=None, dlse=None, softcap=None,
                             sinks=None, alibi_slopes=None):
    """The issues' rule for (out, dq, dk, dv) in [B, H, S, D] (got: out alone without dout;
    with sinks, dsinks after them), as the dense checks of tests/gpu apply it: the kernel's
    error against float64 is at most twice that of the same dense computation done by torch in
    the input dtype, plus a small floor relative to the values' size. Returns the float64
    reference (out, lse, dq, dk, dv, dsinks)."""
    exact = reference(q, k, v, visible, scale, dout, dlse, softcap=softcap, sinks=sinks,
                      alibi_slopes=alibi_slopes)
    rounded = reference(q, k, v, visible, scale, dout, dlse, dtype=q.dtype, softcap=softcap,
                        sinks=sinks, alibi_slopes=alibi_slopes)
    names = ["out", "dq", "dk", "dv"] + (["dsinks"] if sinks is not None else [])
    for name, g, want, low in zip(names, got, exact[:1] + exact[2:], rounded[:1] + rounded[2:]):
        bound = 2 * (low.double() - want).abs().max().item()
        bound += 2e-3 * max(1.0, want.abs().max().item())
        err = (g.double() - want).abs().max().item()
        assert err <= bound, f"{name}: error {err} above {bound}"
    return exact


def assert_lse_matches(lse, want):
    """lse is -inf exactly where the float64 reference `want` is, and close to it elsewhere."""
    finite = torch.isfinite(want)
    assert torch.equal(torch.isfinite(lse), finite)
    torch.testing.assert_close(lse[finite].double(), want[finite], atol=1e-3, rtol=1e-4)


def to_bhsd(x, layout):
    return x if layout == "bhsd" else x.transpose(1, 2)


@functools.cache
def plan_256():
    """A causal plan of 256 rows on the device, made once for the tests that share it."""
    return cm.masks.causal().specialize(nq=256, device=DEVICE)
