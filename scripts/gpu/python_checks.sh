#!/usr/bin/env bash
# Builds and installs the compilemask Python package with the CUDA kernels on the GPU machine
# (offline) and runs the Python tests (CPU and GPU) and examples/train_hstu.py; with the
# argument `bench`, also bench/gpu/bench_python.py (cm.attention on the helpers' default plans
# against Flex; lengths from BENCH_LENS, default 32768, masks from BENCH_MASKS, default
# workloads.py's). Logs go to $OUT (default ./out):
# python_build.log, python_pytest.log, train_hstu.log, python_summary.txt, and bench_python.md
# and .json.
#
# Needs, carried with the tree: .whl/ holding the pinned build tools (nanobind==3.1.0 and
# scikit-build-core==1.1.2 wheels; see docs/python.md), third_party/cutlass (or network for
# scripts/fetch_cutlass.sh) and third_party/shared_reference (a copy of shared/reference, for
# the workload tests; they skip without it).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-${ROOT}/out}"
mkdir -p "${OUT}"
SUMMARY="${OUT}/python_summary.txt"
: > "${SUMMARY}"
export PYTHONUNBUFFERED=1 CM_WORKLOADS="${CM_WORKLOADS:-${ROOT}/third_party/shared_reference}"
# The tool the kernel scripts build (fwd_checks.sh, bwd_checks.sh), for test_cli_workloads.py.
export CM_CLI="${CM_CLI:-${ROOT}/build-device/tools/cli/compilemask}"
note() { echo "$*" | tee -a "${SUMMARY}"; }
cd "${ROOT}" || exit 1

note "python_checks: $(date -u '+%Y-%m-%d %H:%M:%S UTC') $(python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())')"

if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/cm-build-tools \
    --upgrade .whl/*.whl || { note "build tools: wheel install failed"; exit 1; }
  export PYTHONPATH="/tmp/cm-build-tools${PYTHONPATH:+:${PYTHONPATH}}"
fi
"${ROOT}/scripts/fetch_cutlass.sh" || { note "build: CUTLASS headers missing"; exit 1; }

start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" python3 -m pip install -v --no-build-isolation --no-deps \
  -C cmake.define.CM_CUDA=ON -C build-dir=build-device-py . > "${OUT}/python_build.log" 2>&1
status=$?
note "build: exit ${status} in $(( $(date +%s) - start )) s"
[[ ${status} -ne 0 ]] && { grep -E "error|Error" "${OUT}/python_build.log" | head -30; exit 1; }
(cd /tmp && python3 -c "import compilemask as cm; assert cm.cuda_available(), 'no _cuda module'") ||
  { note "import: compilemask._cuda missing"; exit 1; }

start=$(date +%s)
python3 -m pytest tests/python -v -rs --durations=10 > "${OUT}/python_pytest.log" 2>&1
note "pytest: exit $? in $(( $(date +%s) - start )) s: $(grep -E '^=+ .*(passed|failed|error)' "${OUT}/python_pytest.log" | tail -1)"
grep -q "^nanobind: leaked" "${OUT}/python_pytest.log" &&
  note "pytest: nanobind reported leaks at exit: $(grep '^nanobind: leaked' "${OUT}/python_pytest.log" | tr '\n' ' ')"
grep -E "^(FAILED|ERROR)|SKIPPED" "${OUT}/python_pytest.log" | head -30

start=$(date +%s)
timeout 300 python3 examples/train_hstu.py > "${OUT}/train_hstu.log" 2>&1
note "train_hstu: exit $? in $(( $(date +%s) - start )) s: $(tail -2 "${OUT}/train_hstu.log" | tr '\n' ' ')"
if [[ "${1:-}" == "bench" ]]; then
  start=$(date +%s)
  python3 bench/gpu/bench_python.py --workloads "${CM_WORKLOADS}" --out "${OUT}" \
    --lens "${BENCH_LENS:-32768}" ${BENCH_MASKS:+--masks "${BENCH_MASKS}"} \
    > "${OUT}/bench_python.log" 2>&1
  note "bench_python: exit $? in $(( $(date +%s) - start )) s"
fi
cat "${SUMMARY}"
