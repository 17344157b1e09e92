"""How the GPU tests and benchmarks state each workload for the compilemask tool
(bench/gpu/cli_workloads.py), against the workload's predicate: the descriptor the tool makes
of each mapping, read back by cm.Plan.from_descriptor, holds the predicate's mask (for
clear_strips, on the tokens in the order workload_order gives). Those scripts run only on the
GPU machine; this checks their mapping here. Needs the tool: $CM_CLI, or the dev preset's
build/dev/tools/cli/compilemask; skipped without it."""
from __future__ import annotations

import os

import numpy as np
import pytest

import compilemask as cm
from conftest import REPO, cli_workloads, extra_workloads

CLI = os.environ.get("CM_CLI") or str(REPO / "build" / "dev" / "tools" / "cli" / "compilemask")

pytestmark = pytest.mark.skipif(not os.access(CLI, os.X_OK),
                                reason=f"the compilemask tool is not built ({CLI}; set CM_CLI)")

# Each workload at small parameters (the makers' keyword arguments).
CASES = [("causal", {}), ("sliding", {"W": 100}), ("doc_causal", {"mean": 128}),
         ("hstu", {"mean": 128, "ctx": 8}), ("shared_prefix", {"G": 4}),
         ("clear", {"r": 5, "text": 40}), ("clear_strips", {"r": 5, "text": 40}),
         ("natten", {}), ("video", {}), ("random_window", {"max_window": 100})]


@pytest.mark.parametrize("name, args", CASES, ids=[name for name, _ in CASES])
def test_the_tool_compiles_each_workload_to_its_predicate(workloads, name, args):
    maker = extra_workloads.workload(workloads, cli_workloads.workload_base(name))
    predicate, prm = maker(700, **args)
    n = prm["N"]
    mask_file, params = cli_workloads.workload_mask(name, prm)
    blob = cli_workloads.compile_blob(CLI, str(REPO / "examples" / mask_file), params, n, n)
    order = cli_workloads.workload_order(CLI, name, prm)
    tokens = np.arange(n) if order is None else order
    expected = predicate(0, 0, tokens[:, None], tokens[None, :])
    np.testing.assert_array_equal(cm.Plan.from_descriptor(blob).to_dense(), expected)
    assert (order is None) == (name != "clear_strips")


def test_a_failing_tool_call_names_the_command():
    with pytest.raises(RuntimeError, match="strip-order .* failed"):
        cli_workloads.strip_order(CLI, 0, 4, 4, 2, 10)
