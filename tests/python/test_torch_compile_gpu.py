"""GPU tests of cm.attention under torch.compile(fullgraph=True) (forward and backward, no
recompiles for new parameter values, plans with a token order), in eager calls (the dispatcher
bypass), and in CUDA graph replay."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

# torch_gpu first: it skips this module where the kernels cannot run.
from torch_gpu import DEVICE, MASKS, hstu
import torch  # noqa: E402
import compilemask as cm  # noqa: E402


def hstu_plans(n, count):
    """Plans of one mask and shape whose parameter values differ."""
    rng = np.random.default_rng(3)
    plans = []
    for _ in range(count):
        # Sequences of at least 10 tokens: room for up to 5 context and 5 target tokens.
        cuts = 16 + 10 * np.sort(rng.choice((n - 32) // 10, size=3, replace=False))
        lengths = np.diff(np.concatenate([[0], cuts, [n]]))
        plans.append(hstu(n, lengths.tolist(), ctx=int(rng.integers(1, 6)),
                          targets=int(rng.integers(1, 6))).specialize(nq=n, device=DEVICE))
    return plans


def test_torch_compile_fullgraph_does_not_recompile_for_new_parameter_values():
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")

    @torch.compile(backend=counter, fullgraph=True)
    def layer(q, k, v, plan):
        return cm.attention(q, k, v, plan).float().square().sum()

    n = 512
    q, k, v = (torch.randn(2, n, 2, 64, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    for plan in hstu_plans(n, 4):
        loss = layer(q, k, v, plan)
        grads = torch.autograd.grad(loss, (q, k, v))
        eager = cm.attention(q, k, v, plan).float().square().sum()
        eager_grads = torch.autograd.grad(eager, (q, k, v))
        torch.testing.assert_close(loss, eager, rtol=1e-3, atol=1e-2)
        for g, e in zip(grads, eager_grads):
            torch.testing.assert_close(g, e, rtol=2e-2, atol=2e-2)
    assert counter.frame_count == 1, f"compiled {counter.frame_count} times for 4 plans"


def test_torch_compile_fullgraph_runs_plans_with_a_token_order():
    torch._dynamo.reset()

    @torch.compile(fullgraph=True)
    def layer(q, k, v, plan):
        return cm.attention(q, k, v, plan).float().square().sum()

    n = 20 * 20 + 112
    q, k, v = (torch.randn(1, n, 2, 64, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    for radius in (3, 5):
        plan = cm.masks.clear(112, 20, radius, strip=6, reorder=True).specialize(
            nq=n, device=DEVICE)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            grads = torch.autograd.grad(layer(q, k, v, plan), (q, k, v))
        assert not [w for w in caught if "not writable" in str(w.message)], \
            "dynamo guarded on the plan's numpy token order"
        eager = torch.autograd.grad(cm.attention(q, k, v, plan).float().square().sum(),
                                    (q, k, v))
        for g, e in zip(grads, eager):
            torch.testing.assert_close(g, e, rtol=2e-2, atol=2e-2)


def test_torch_compile_traces_the_backward_kernel_into_the_graph():
    from torch._dynamo.testing import AotEagerAndRecordGraphs

    torch._dynamo.reset()
    backend = AotEagerAndRecordGraphs()

    # With attention sinks, whose gradient the backward operator returns too, and ALiBi, whose
    # slopes reach the backward operator as an input without a gradient.
    @torch.compile(backend=backend, fullgraph=True)
    def layer(q, k, v, plan, sinks):
        out, lse = cm.attention(q, k, v, plan, return_lse=True, deterministic=True, sinks=sinks,
                                alibi_slopes=slopes)
        return out.float().square().sum() + lse.sum()

    n = 384
    plan = MASKS["shared_prefix"](n).specialize(nq=n, device=DEVICE)
    # V with a head dim of its own (MLA), which the fake implementations' shapes must follow.
    q, k, v = (torch.randn(1, n, 2, dim, device=DEVICE, dtype=torch.float16, requires_grad=True)
               for dim in (64, 64, 40))
    sinks = torch.tensor([1.0, 3.0], device=DEVICE, requires_grad=True)
    slopes = torch.tensor([0.25, 0.0625], device=DEVICE)
    grads = torch.autograd.grad(layer(q, k, v, plan, sinks), (q, k, v, sinks))
    out, lse = cm.attention(q, k, v, plan, return_lse=True, deterministic=True, sinks=sinks,
                            alibi_slopes=slopes)
    eager = torch.autograd.grad(out.float().square().sum() + lse.sum(), (q, k, v, sinks))
    for g, e in zip(grads, eager):
        torch.testing.assert_close(g, e, rtol=1e-2, atol=1e-2)
    assert grads[3].abs().min() > 0, "no gradient reached the sinks"
    assert len(backend.bw_graphs) == 1
    assert "compilemask.attention_backward" in backend.bw_graphs[0].code
    assert "compilemask.attention_backward" not in backend.fw_graphs[0].code


def test_eager_calls_bypass_the_operator_that_dispatch_modes_see():
    """A plain eager call runs the kernels through compilemask._torch_ops._EagerAttention, without
    the dispatcher's custom-op layers; under a dispatch mode cm.attention goes through the
    operator compilemask::attention_forward, which the mode sees, and both give the same out,
    LSE and (deterministic) gradients, bit for bit."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    torch.manual_seed(8)
    n = 300
    plan = MASKS["doc_causal"](n).specialize(nq=n, device=DEVICE)
    q, k, v = (torch.randn(1, n, 2, 64, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dout, dlse = torch.randn_like(q), torch.randn(1, 2, n, device=DEVICE)

    def run():
        out, lse = cm.attention(q, k, v, plan, return_lse=True, deterministic=True)
        grads = torch.autograd.grad((out, lse), (q, k, v), (dout, dlse))
        return out, (out, lse, *grads)

    out, eager = run()
    assert type(out.grad_fn).__name__ == "_EagerAttentionBackward"
    recorder = Recorder()
    with recorder:
        out, moded = run()
    assert type(out.grad_fn).__name__ != "_EagerAttentionBackward"
    assert "compilemask.attention_forward.default" in recorder.ops, recorder.ops
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), eager, moded):
        assert torch.equal(a, b), f"{name} differs under the dispatch mode"


def test_differentiating_the_gradient_raises():
    """The kernels have no second derivative: differentiating a gradient of cm.attention raises
    instead of dropping the second-order term."""
    n = 256
    plan = MASKS["causal"](n).specialize(nq=n, device=DEVICE)
    q, k, v = (torch.randn(1, n, 2, 64, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    (dq,) = torch.autograd.grad(cm.attention(q, k, v, plan).float().square().sum(), q,
                                create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        dq.float().square().sum().backward()


def captured_graph(step):
    """step() captured in a CUDA graph, after two warm-up calls on a side stream (as capture
    needs): (the graph, what the captured call returned)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    return graph, captured


def test_cuda_graph_replay_of_split_keys():
    # A decoding step: split keys and shared GQA tiles, so the forward is the main kernel and
    # the combine, its programmatic dependent; replayed on fresh inputs it matches eager calls.
    plan = MASKS["causal"](1).specialize(nq=1, nk=3000, device=DEVICE)
    static = [torch.randn(2, 1, 8, 128, device=DEVICE, dtype=torch.bfloat16)]
    static += [torch.randn(2, 3000, 2, 128, device=DEVICE, dtype=torch.bfloat16)
               for _ in range(2)]
    graph, captured = captured_graph(lambda: cm.attention(*static, plan))
    for seed in range(3):
        torch.manual_seed(seed)
        fresh = [torch.randn_like(x) for x in static]
        for s_, f in zip(static, fresh):
            s_.copy_(f)
        captured.fill_(float("nan"))
        graph.replay()
        assert torch.equal(captured, cm.attention(*fresh, plan))


@pytest.mark.parametrize("order", ["tensors' own", "random token order"])
def test_cuda_graph_replay_with_new_inputs(order):
    n = 640
    mask = MASKS["doc_causal"](n)
    if order == "random token order":
        mask = mask.with_token_order(lambda nq: np.random.default_rng(2).permutation(nq))
    plan = mask.specialize(nq=n, device=DEVICE)
    static = [torch.randn(2, n, 4, 128, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
              for _ in range(3)]
    static_dout = torch.randn_like(static[0])

    def step(inputs, dout):
        out = cm.attention(*inputs, plan, deterministic=True)
        return (out, *torch.autograd.grad(out, inputs, dout))

    graph, captured = captured_graph(lambda: step(static, static_dout))
    for seed in range(3):
        torch.manual_seed(seed)
        fresh = [torch.randn_like(x).requires_grad_() for x in static]
        fresh_dout = torch.randn_like(static_dout)
        with torch.no_grad():
            for s_, f in zip(static, fresh):
                s_.copy_(f)
            static_dout.copy_(fresh_dout)
        graph.replay()
        for got, want in zip(captured, step(fresh, fresh_dout)):
            assert torch.equal(got, want)
