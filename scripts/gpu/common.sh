# shellcheck shell=bash
# Shared prologue of the GPU-machine scripts (run_all.sh, fwd_checks.sh, bwd_checks.sh); source
# it, do not run it. Sets ROOT (the repository), STAGES (the script's arguments, or the kernel
# scripts' stages build test sanitize bench),
# PYTHONUNBUFFERED, BUILD (CM_BUILD, default build-device; shared by both scripts), CLI and LIB
# (the tool and the kernel library in BUILD) and WORKLOADS (the first folder holding
# workloads.py of CM_WORKLOADS, third_party/shared_reference and ../shared/reference; empty if
# none), and defines the helpers below. The caller sets OUT and SUMMARY (a file in OUT) and
# then calls start_summary.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STAGES=("$@")
[[ ${#STAGES[@]} -eq 0 ]] && STAGES=(build test sanitize bench)
export PYTHONUNBUFFERED=1
BUILD="${CM_BUILD:-${ROOT}/build-device}"
CLI="${BUILD}/tools/cli/compilemask"
LIB="${BUILD}/kernels/libcompilemask_cuda.so"
WORKLOADS=""
for dir in "${CM_WORKLOADS:-}" "${ROOT}/third_party/shared_reference" "${ROOT}/../shared/reference"; do
  if [[ -n "${dir}" && -f "${dir}/workloads.py" ]]; then WORKLOADS="${dir}"; break; fi
done

# note TEXT...: prints the line and appends it to SUMMARY.
note() { echo "$*" | tee -a "${SUMMARY}"; }
# wants STAGE: whether STAGE was asked for.
wants() { local s; for s in "${STAGES[@]}"; do [[ "$s" == "$1" ]] && return 0; done; return 1; }
# elapsed START: seconds since START (from date +%s), as "N s".
elapsed() { echo "$(( $(date +%s) - $1 )) s"; }

# start_summary HEADLINE: empties SUMMARY (creating OUT) and notes the headline and the GPU.
start_summary() {
  mkdir -p "${OUT}"
  : > "${SUMMARY}"
  note "$1"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee -a "${SUMMARY}"
}

# configure_and_build LOG TARGET...: fetches the CUTLASS headers (exits if that fails),
# configures a Release build with the kernels in BUILD and builds the targets with ninja, all
# output into LOG. Returns the exit status of the configure or the build.
configure_and_build() {
  local log="$1"
  shift
  "${ROOT}/scripts/fetch_cutlass.sh" || { note "build: CUTLASS headers missing"; exit 1; }
  # The GPU image may lack GoogleTest; a copy can travel in third_party/gtest (prefix layout).
  local prefix=()
  [[ ! -f /usr/include/gtest/gtest.h && -d "${ROOT}/third_party/gtest" ]] &&
    prefix=(-DCMAKE_PREFIX_PATH="${ROOT}/third_party/gtest")
  cmake -S "${ROOT}" -B "${BUILD}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCM_CUDA=ON \
    -DCM_BUILD_BENCH=OFF -DCM_PTXAS_REPORT=ON "${prefix[@]}" > "${log}" 2>&1 &&
    ninja -C "${BUILD}" -j 16 "$@" >> "${log}" 2>&1
}

# sanitize LOG TEST FILTER TOOL...: runs each compute-sanitizer TOOL (memcheck, racecheck,
# synccheck) over the gtest binary TEST's FILTER, all output into LOG, and notes the verdicts.
sanitize() {
  local log="$1" test="$2" filter="$3" tool start
  shift 3
  start=$(date +%s)
  : > "${log}"
  for tool in "$@"; do
    {
      echo "== ${tool}"
      timeout 200 compute-sanitizer --tool "${tool}" --error-exitcode 3 "${test}" \
        --gtest_filter="${filter}" 2>&1
      echo "${tool} exit $?"
    } >> "${log}"
  done
  note "sanitize: $(grep -E '^(memcheck|racecheck|synccheck) exit|ERROR SUMMARY|RACECHECK SUMMARY' "${log}" | tr '\n' ' ') in $(elapsed "${start}")"
}

# build_stage LOG TARGET...: the build stage: configure_and_build, then notes the kernels
# that spill (from ptxas -v: each entry function followed by its spill line), errors, and the
# exit status; exits the script if the build failed.
build_stage() {
  local log="$1" start status
  shift
  start=$(date +%s)
  configure_and_build "${log}" "$@"
  status=$?
  grep -E "Compiling entry function|[1-9][0-9]* bytes spill stores|error|Performance Loss|C751" \
    "${log}" | grep -B1 -E "[1-9][0-9]* bytes spill stores|error|Performance Loss|C751" |
    grep -v -- '^--$' | head -24 | tee -a "${SUMMARY}"
  note "build: exit ${status} in $(elapsed "${start}")"
  [[ ${status} -ne 0 ]] && { tail -40 "${log}"; exit 1; }
}

# bench_stage SCRIPT TABLE DEFAULT_LENS DEFAULT_BUDGET: the bench stage: runs the benchmark
# SCRIPT over BENCH_LENS (default DEFAULT_LENS) and BENCH_MASKS (default every workload) at head
# dim BENCH_DIM (default 128) within BENCH_BUDGET seconds (default DEFAULT_BUDGET), its output
# into OUT/TABLE.log, and notes the exit status and any error lines. The script writes
# OUT/TABLE.md and OUT/TABLE.json.
bench_stage() {
  local script="$1" table="$2" start status
  start=$(date +%s)
  python3 "${script}" --cli "${CLI}" --lib "${LIB}" --examples "${ROOT}/examples" \
    --workloads "${WORKLOADS}" --out "${OUT}" --lens "${BENCH_LENS:-$3}" \
    --masks "${BENCH_MASKS:-causal,hstu,shared_prefix,clear,clear_strips,doc_causal,sliding}" \
    --dim "${BENCH_DIM:-128}" \
    --budget "${BENCH_BUDGET:-$4}" > "${OUT}/${table}.log" 2>&1
  status=$?
  note "bench: exit ${status} in $(elapsed "${start}")"
  grep -vE "^\{" "${OUT}/${table}.log" | grep -iE "error|Traceback" | head -10 | tee -a "${SUMMARY}"
}
