#!/usr/bin/env bash
# The forward kernel's GPU work, in stages: build, the C++ test against
# the CPU reference, the dense-reference sweep (both mainloops), the row gather of token
# orders (gpu_permute_rows_test) and packed offsets outside their tensors in both passes
# (gpu_packed_bounds_test), compute-sanitizer memcheck, racecheck and synccheck on small
# shapes (and memcheck of the row gather and of the packed bounds), the forward benchmark, the
# clock and power probe (bench/gpu/power_probe.py; BENCH_MASKS default causal,doc_causal,hstu),
# and the benchmark of split keys on few query rows against many keys (bench/gpu/bench_decode.py).
# Logs and tables go to $OUT (default ./out). Before the call, run scripts/gpu/prepare_carry.sh
# here and carry third_party/.
#
# Usage: scripts/gpu/fwd_checks.sh [STAGE...]   stages: build test sanitize bench power decode
#        (default: build test sanitize bench)
# Environment: OUT (output folder), CM_BUILD and CM_WORKLOADS (see common.sh; workloads.py is
# in third_party/shared_reference after prepare_carry.sh), BENCH_LENS, BENCH_MASKS, BENCH_DIM,
# BENCH_BUDGET (seconds).
set -uo pipefail
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" "$@"

OUT="${OUT:-${ROOT}/out}"
CPP_TEST="${BUILD}/tests/gpu/gpu_forward_test"
PERMUTE_TEST="${BUILD}/tests/gpu/gpu_permute_rows_test"
BOUNDS_TEST="${BUILD}/tests/gpu/gpu_packed_bounds_test"
SUMMARY="${OUT}/summary.txt"
start_summary "fwd_checks: $(date -u '+%Y-%m-%d %H:%M:%S UTC') stages: ${STAGES[*]}"

if wants build; then
  build_stage "${OUT}/build.log" compilemask_cli compilemask_cuda gpu_forward_test \
    gpu_permute_rows_test gpu_packed_bounds_test
fi

if wants test; then
  : > "${OUT}/test_cpp.log"
  : > "${OUT}/test_dense.log"
  start=$(date +%s)
  timeout 450 "${CPP_TEST}" > "${OUT}/test_cpp.log" 2>&1
  note "test (C++ vs CPU reference, both mainloops): exit $? $(grep -E '^\[  (PASSED|FAILED)' "${OUT}/test_cpp.log" | tr '\n' ' ')"
  for mainloop in serial pingpong; do
    echo "== mainloop ${mainloop}" >> "${OUT}/test_dense.log"
    timeout 300 python3 "${ROOT}/tests/gpu/test_forward.py" --cli "${CLI}" --lib "${LIB}" \
      --examples "${ROOT}/examples" --workloads "${WORKLOADS}" --mainloop "${mainloop}" \
      >> "${OUT}/test_dense.log" 2>&1
    note "test ${mainloop} (dense workloads): exit $? $(tail -1 "${OUT}/test_dense.log")"
  done
  timeout 120 "${PERMUTE_TEST}" > "${OUT}/test_permute.log" 2>&1
  note "test permute_rows (token orders): exit $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "${OUT}/test_permute.log" | tr '\n' ' ')"
  timeout 120 "${BOUNDS_TEST}" > "${OUT}/test_bounds.log" 2>&1
  note "test packed_bounds (offsets outside the tensors): exit $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "${OUT}/test_bounds.log" | tr '\n' ' ')"
  note "test: $(elapsed "${start}")"
  grep -E "FAILED|Failure" "${OUT}/test_cpp.log" "${OUT}/test_bounds.log" | sort | uniq | head -20
  grep FAIL "${OUT}/test_dense.log" | head -30
fi

if wants sanitize; then
  sanitize "${OUT}/sanitizer.log" "${CPP_TEST}" \
    'Examples/*/0:Examples/*/1:Examples/*/17:Examples/*/22:Examples/*/23:Examples/*/29:Examples/*/30:TwoCtas/*/34:TwoCtas/*/35:Examples/*/38:Examples/*/41:HeadDim256/*/1:HeadDim256/*/7:Softcap/*/1:SplitKeys/*/1:SplitKeys/*/22:SplitKeys/*/29:Decode/*/0:Decode/*/2:Decode/*/36:Decode/*/48:Decode/*/60:PagedKeys/*/0:PagedKeys/*/101:PackedKeys/*/43:PackedKeys/*/49:PackedKeysHeadDim256/*/3' \
    memcheck racecheck synccheck
  sanitize "${OUT}/sanitizer_permute.log" "${PERMUTE_TEST}" '*' memcheck
  sanitize "${OUT}/sanitizer_bounds.log" "${BOUNDS_TEST}" '*' memcheck
fi

if wants bench; then
  bench_stage "${ROOT}/bench/gpu/bench_fwd.py" bench_fwd 32768,1024,4096,16384 300
  cat "${OUT}/bench_fwd.md" 2>/dev/null
fi

if wants decode; then
  start=$(date +%s)
  python3 "${ROOT}/bench/gpu/bench_decode.py" --cli "${CLI}" --lib "${LIB}" \
    --examples "${ROOT}/examples" --out "${OUT}" --budget "${BENCH_BUDGET:-300}" \
    > "${OUT}/bench_decode.log" 2>&1
  note "decode bench: exit $? in $(elapsed "${start}")"
  grep -iE "error|Traceback" "${OUT}/bench_decode.log" | head -10 | tee -a "${SUMMARY}"
  cat "${OUT}/bench_decode.md" 2>/dev/null
fi

if wants power; then
  BENCH_MASKS="${BENCH_MASKS:-causal,doc_causal,hstu}" \
    bench_stage "${ROOT}/bench/gpu/power_probe.py" power_probe 32768 300
  cat "${OUT}/power_probe.md" 2>/dev/null
fi
cat "${SUMMARY}"
