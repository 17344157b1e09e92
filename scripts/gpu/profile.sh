#!/usr/bin/env bash
# Nsight Compute profile of one launch of our forward or backward main kernel per workload, on
# the GPU machine: speed of light, warp states (why the warps stall), scheduler and occupancy
# statistics, the tensor pipe's activity, and the SASS lines where the warps stall most
# (source counters). Builds the tool and the library first unless they are there.
#
# Usage: scripts/gpu/profile.sh fwd|bwd MASKS   MASKS: comma-separated workloads
# Environment: OUT (default ./out/profile; receives the report ncu_PASS.ncu-rep, its text
# ncu_PASS.txt, sass_PASS.csv (the source page) and its summary hotspots_PASS.txt
# (bench/gpu/sass_hotspots.py), profiled_PASS.json and profile_summary.txt),
# BENCH_LENS (default 32768), PROFILE_ARGS (more profile_one.py flags, word-split: "--dim 192
# --dim-v 128" for MLA), CM_BUILD and CM_WORKLOADS (see common.sh).
set -uo pipefail
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[[ $# -eq 2 && ( "$1" == fwd || "$1" == bwd ) ]] || { echo "usage: $0 fwd|bwd MASKS" >&2; exit 2; }
PASS="$1"
MASKS="$2"
OUT="${OUT:-${ROOT}/out/profile}"
SUMMARY="${OUT}/profile_summary.txt"
start_summary "profile: $(date -u '+%Y-%m-%d %H:%M:%S UTC') ${PASS} masks: ${MASKS}"
[[ -x "${CLI}" && -f "${LIB}" ]] || build_stage "${OUT}/profile_build.log" compilemask_cli compilemask_cuda

# The tensor pipe's activity, instructions, shared-memory bank conflicts, and every stall
# reason as warps stalled per issued instruction.
METRICS="sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum"
METRICS+=",l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"
METRICS+=",regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio"
start=$(date +%s)
report="${OUT}/ncu_${PASS}.txt"
ncu --profile-from-start off --kernel-name "regex:${PASS}_kernel" \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  --section Occupancy --section LaunchStats --section SourceCounters \
  --metrics "${METRICS}" --import-source no -f -o "${OUT}/ncu_${PASS}" \
  python3 "${ROOT}/bench/gpu/profile_one.py" --pass "${PASS}" --cli "${CLI}" --lib "${LIB}" \
  --examples "${ROOT}/examples" --workloads "${WORKLOADS}" --out "${OUT}" \
  --lens "${BENCH_LENS:-32768}" --masks "${MASKS}" ${PROFILE_ARGS:-} > "${OUT}/ncu_${PASS}.log" 2>&1
note "ncu ${PASS}: exit $? in $(elapsed "${start}")"
ncu -i "${OUT}/ncu_${PASS}.ncu-rep" --print-details all > "${report}" 2>&1
note "$(grep -c '^  .*_kernel' "${report}") kernels profiled"
# Per SASS instruction of each profiled launch: executed instructions and the warp-stall samples
# by reason, which attribute the stalls above to the lines of code that take them.
ncu -i "${OUT}/ncu_${PASS}.ncu-rep" --page source --print-source sass --csv \
  > "${OUT}/sass_${PASS}.csv" 2>&1
note "source page: exit $? ($(wc -l < "${OUT}/sass_${PASS}.csv") lines in sass_${PASS}.csv)"
python3 "${ROOT}/bench/gpu/sass_hotspots.py" "${OUT}/sass_${PASS}.csv" > "${OUT}/hotspots_${PASS}.txt" 2>&1
note "hotspots: exit $? (hotspots_${PASS}.txt)"
grep -E "^  .*_kernel|Duration|Compute \(SM\) Throughput|hmma_cycles_active|issue_stalled|Warp Cycles Per Issued" \
  "${report}" | head -80 | tee -a "${SUMMARY}"
