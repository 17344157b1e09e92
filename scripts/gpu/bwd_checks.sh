#!/usr/bin/env bash
# Builds CompileMask on the GPU machine and checks the sm90 backward pass in one call: the host
# layout test, the C++ test against the float64 CPU reference from the descriptor (every
# example mask, determinism, graph capture), the dense-reference sweep from
# workloads.py (odd lengths, head dims, GQA, layouts, fully masked rows, deterministic mode
# bitwise over 10 runs), compute-sanitizer memcheck and racecheck on small shapes, and the
# fwd+bwd benchmark against compiled FlexAttention and cuDNN SDPA. At most 8 files go to $OUT.
#
# Usage: scripts/gpu/bwd_checks.sh [STAGE...]   stages: build test sanitize bench (default: all)
# Environment: OUT (output folder; default ./out/bwd), CM_BUILD and CM_WORKLOADS (see
# common.sh), BENCH_LENS, BENCH_MASKS, BENCH_DIM, BENCH_BUDGET (seconds after which no new
# benchmark row starts).
set -uo pipefail
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" "$@"

OUT="${OUT:-${ROOT}/out/bwd}"
CPP_TEST="${BUILD}/tests/gpu/gpu_backward_test"
LAYOUT_TEST="${BUILD}/tests/gpu/gpu_bwd_layout_test"
SUMMARY="${OUT}/bwd_summary.txt"
start_summary "bwd_checks: $(date -u '+%Y-%m-%d %H:%M:%S UTC') stages: ${STAGES[*]} workloads: ${WORKLOADS:-none}"

if wants build; then
  build_stage "${OUT}/bwd_build.log" compilemask_cli compilemask_cuda gpu_backward_test \
    gpu_bwd_layout_test
fi

if wants test; then
  start=$(date +%s)
  log="${OUT}/bwd_test_cpp.log"
  timeout 60 "${LAYOUT_TEST}" > "${log}" 2>&1
  note "test layout (host, vs CuTe): exit $? $(grep -E '^\[  (PASSED|FAILED)' "${log}" | tail -1)"
  timeout 300 "${CPP_TEST}" >> "${log}" 2>&1
  note "test C++ (vs CPU float64 reference): exit $? $(grep -E '^\[  (PASSED|FAILED)' "${log}" | tail -2 | tr '\n' ' ') in $(elapsed "${start}")"
  grep -E "FAILED|Failure|error" "${log}" | sort | uniq | head -20 | tee -a "${SUMMARY}"
  start=$(date +%s)
  dense="${OUT}/bwd_test_dense.log"
  timeout 400 python3 "${ROOT}/tests/gpu/bwd_test.py" --cli "${CLI}" --lib "${LIB}" \
    --examples "${ROOT}/examples" --workloads "${WORKLOADS}" > "${dense}" 2>&1
  note "test dense (vs float64 torch, 2x naive rule): exit $? $(tail -1 "${dense}") in $(elapsed "${start}")"
  grep -E "^FAIL|Error" "${dense}" | head -30 | tee -a "${SUMMARY}"
fi

if wants sanitize; then
  # Small shapes (case i of example_cases() is 2i, and 2i + 1 deterministic): causal bf16 d128
  # (dQ by bulk reduce-add), causal fp16 d64 deterministic, shared_prefix deterministic,
  # cross_attention with rows that see no key, the 3D grid of video_neighbourhood, head dim 96
  # (padded to 128), head dim 40 (padded to 64) deterministic; with a gradient of the LSE, causal
  # and, deterministic, doc_causal with rows that see no key; head dim 256: causal, and
  # doc_causal deterministic; with soft-capped logits, causal; packed with NaN between the
  # sequences (the tail lanes), causal bf16 d128 and, deterministic, causal at head dim 256; the
  # kv group's heads in one CTA (MQA) and, deterministic and packed, split in two (doc_causal);
  # V with its own head dim (MLA's kernel, two Q/dO stages): both modes, with a gradient of the
  # LSE, and deterministic and packed.
  # (These GQA cases split their heads automatically: the forced splits add the unsplit path.)
  sanitize "${OUT}/bwd_sanitizer.log" "${CPP_TEST}" \
    'HeadDim256/BackwardMatchesReference.Gradients/0:HeadDim256/BackwardMatchesReference.Gradients/3:Examples/BackwardMatchesReference.Gradients/0:Examples/BackwardMatchesReference.Gradients/3:Examples/BackwardMatchesReference.Gradients/19:Examples/BackwardMatchesReference.Gradients/28:Examples/BackwardMatchesReference.Gradients/30:Examples/BackwardMatchesReference.Gradients/40:Examples/BackwardMatchesReference.Gradients/43:Examples/LseGradientMatchesReference.Gradients/0:Examples/LseGradientMatchesReference.Gradients/13:Softcap/BackwardMatchesReference.Gradients/0:Examples/PackedBackwardMatchesReference.Gradients/0:HeadDim256/PackedBackwardMatchesReference.Gradients/1:Forced/HeadSplitsMatchReference.Gradients/0:Forced/HeadSplitsMatchReference.Gradients/11:ValueHeadDim/BackwardMatchesReference.Gradients/0:ValueHeadDim/BackwardMatchesReference.Gradients/1:ValueHeadDim/LseGradientMatchesReference.Gradients/0:ValueHeadDim/PackedBackwardMatchesReference.Gradients/1' \
    memcheck racecheck
fi

if wants bench; then
  bench_stage "${ROOT}/tests/gpu/bwd_bench.py" bench_bwd 32768,16384,4096,1024 240
  { tee -a "${SUMMARY}" < "${OUT}/bench_bwd.md"; } 2>/dev/null
fi
cat "${SUMMARY}"
