#!/usr/bin/env bash
# Everything GPU in one call on the GPU machine: the forward checks and benchmark
# (fwd_checks.sh), the backward checks and fwd+bwd benchmark (bwd_checks.sh), the Python
# package's GPU tests and training example (python_checks.sh), and `compilemask run --gpu`.
# Before the call, run scripts/gpu/prepare_carry.sh here and carry third_party and .whl.
#
# Usage: scripts/gpu/run_all.sh [STAGE...]   stages: build test sanitize bench python cli
#        (default: all). OUT (default ./out) receives the results, at most eight files:
#   summary.txt    every script's summary lines, in order
#   bench_fwd.md, bench_fwd.json, bench_fwd.png    forward benchmark (bench stage)
#   bench_bwd.md, bench_bwd.json                   fwd+bwd benchmark (bench stage)
#   logs.txt       the failure lines of every log, and the CLI run
# Full logs stay in $LOGS (default /tmp/cm-logs) on the GPU machine. Measured in session 29
# (runs 171-173): build, test and sanitize of both passes about 100 s, the forward bench at
# the four lengths 100 s, the forward + backward bench 150 s, the Python stage 80 s; all
# stages fit one 10-minute device call, with little to spare on a slow machine, so split them
# over calls when the time is short (build test sanitize; then bench with BENCH_LENS, or
# fwd_checks.sh / bwd_checks.sh bench).
set -uo pipefail
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" "$@"
[[ $# -eq 0 ]] && STAGES=(build test sanitize bench python cli)
OUT="${OUT:-${ROOT}/out}"
LOGS="${LOGS:-/tmp/cm-logs}"
kernel_stages=()
for s in build test sanitize bench; do wants "$s" && kernel_stages+=("$s"); done
mkdir -p "${OUT}" "${LOGS}"

if [[ ${#kernel_stages[@]} -gt 0 ]]; then
  OUT="${LOGS}/fwd" "${ROOT}/scripts/gpu/fwd_checks.sh" "${kernel_stages[@]}" > "${LOGS}/fwd.txt" 2>&1
  OUT="${LOGS}/bwd" "${ROOT}/scripts/gpu/bwd_checks.sh" "${kernel_stages[@]}" > "${LOGS}/bwd.txt" 2>&1
fi
if wants python; then
  OUT="${LOGS}/python" "${ROOT}/scripts/gpu/python_checks.sh" > "${LOGS}/python.txt" 2>&1
fi
if wants cli; then
  {
    echo "== compilemask run --gpu --backward (shared_prefix, N = 4096, GQA 4:2, d128)"
    "${CLI}" run "${ROOT}/examples/shared_prefix.mask" -p prompt=0:1024 \
      -p responses=1024,1792,2560,3328,4096 -n 4096 --heads 4 --heads-kv 2 --dim 128 --backward --gpu
    echo "exit $?"
    echo "== compilemask run --gpu --backward (doc_causal, N = 2000, d256, fp16)"
    "${CLI}" run "${ROOT}/examples/doc_causal.mask" -p docs=0,700,1300,2000 -n 2000 --heads 4 \
      --dim 256 --dtype fp16 --backward --gpu
    echo "exit $?"
    echo "== compilemask run --gpu --backward --softcap 0.5 (sliding window, N = 3000, GQA 8:1, d64)"
    "${CLI}" run "${ROOT}/examples/sliding_window.mask" -p W=700 -n 3000 --heads 8 --heads-kv 1 \
      --dim 64 --softcap 0.5 --backward --gpu
    echo "exit $?"
    echo "== compilemask run --gpu --splits 7 (causal, 16 query rows against 5000 keys, GQA 8:2)"
    "${CLI}" run "${ROOT}/examples/causal.mask" --nq 16 --nk 5000 --heads 8 --heads-kv 2 \
      --dim 128 --splits 7 --gpu
    echo "exit $?"
    echo "== compilemask run --gpu --pages 16 (causal, one query row against 5000 keys, GQA 8:2)"
    "${CLI}" run "${ROOT}/examples/causal.mask" --nq 1 --nk 5000 --batch 3 --heads 8 \
      --heads-kv 2 --dim 128 --pages 16 --gpu
    echo "exit $?"
    echo "== cli_test's GPU cases (--softcap, --splits, --head-splits, --pages against the reference)"
    if ninja -C "${BUILD}" -j 16 cli_test > "${LOGS}/cli_test_build.log" 2>&1; then
      "${BUILD}/tests/cli/cli_test" --gtest_filter='*Gpu*' > "${LOGS}/cli_test.log" 2>&1
      echo "exit $?"
      grep -E "PASSED|FAILED|Failure" "${LOGS}/cli_test.log"
    else
      echo "exit 1: cli_test did not build (${LOGS}/cli_test_build.log)"
    fi
  } > "${LOGS}/cli.txt" 2>&1
fi

cat "${LOGS}"/fwd/summary.txt "${LOGS}"/bwd/bwd_summary.txt "${LOGS}"/python/python_summary.txt \
  2>/dev/null > "${OUT}/summary.txt"
for f in bench_fwd.md bench_fwd.json bench_fwd.png; do cp "${LOGS}/fwd/${f}" "${OUT}/" 2>/dev/null; done
for f in bench_bwd.md bench_bwd.json; do cp "${LOGS}/bwd/${f}" "${OUT}/" 2>/dev/null; done
{
  grep -hE "^FAIL|FAILED|Failure|error:|Race reported|Traceback" "${LOGS}"/fwd/*.log \
    "${LOGS}"/bwd/*.log "${LOGS}"/python/*.log 2>/dev/null | sort | uniq -c | sort -rn | head -60
  cat "${LOGS}/cli.txt" 2>/dev/null
  tail -5 "${LOGS}/python/train_hstu.log" 2>/dev/null
} > "${OUT}/logs.txt"
cat "${OUT}/summary.txt"
