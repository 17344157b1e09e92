#!/usr/bin/env bash
# A/B timing of kernel or compiler changes on the GPU machine: builds the tool and the kernel
# library of each tree NAME (an earlier revision, or HEAD with a patch of experiments/) and of
# the working tree, then times the forward and backward of each NAME (A, with its own tool's
# descriptors) against the working tree (B) in alternating rounds (bench/gpu/ab.py). The GPU
# machine gets no .git: run scripts/gpu/prepare_carry.sh REV|PATCH... here first, which puts
# each tree in third_party/ab/NAME.tar, and carry third_party.
#
# Usage: scripts/gpu/ab_checks.sh MASKS NAME...   MASKS: comma-separated workloads
# Environment: OUT (default ./out/ab; receives ab.md and ab_summary.txt), BENCH_LENS (default
# 32768), AB_ARGS (more ab.py flags, word-split: "--softcap 1.5", "--deterministic"), CM_BUILD
# and CM_WORKLOADS (see common.sh).
set -uo pipefail
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[[ $# -ge 2 ]] || { echo "usage: $0 MASKS REV..." >&2; exit 2; }
MASKS="$1"
shift
OUT="${OUT:-${ROOT}/out/ab}"
SUMMARY="${OUT}/ab_summary.txt"
start_summary "ab_checks: $(date -u '+%Y-%m-%d %H:%M:%S UTC') A: $* masks: ${MASKS}"
: > "${OUT}/ab.md"

for rev in "$@"; do
  tarball="${ROOT}/third_party/ab/${rev}.tar"
  [[ -f "${tarball}" ]] || { note "ab: ${tarball} missing (scripts/gpu/prepare_carry.sh ${rev})"; exit 1; }
  tree="/tmp/cm-ab/${rev}"
  if ! (rm -rf "${tree}" && mkdir -p "${tree}" && tar -xf "${tarball}" -C "${tree}" &&
    ln -s "${ROOT}/third_party" "${tree}/third_party"); then
    note "ab: cannot unpack ${tarball}"
    exit 1
  fi
  # configure_and_build on the unpacked tree: ROOT and BUILD set for that call only.
  ROOT="${tree}" BUILD="${tree}-build" configure_and_build "${OUT}/ab_build_${rev}.log" \
    compilemask_cli compilemask_cuda &
done
build_stage "${OUT}/ab_build.log" compilemask_cli compilemask_cuda
for rev in "$@"; do
  wait -n
  note "build A: exit $?"
done

for rev in "$@"; do
  start=$(date +%s)
  python3 "${ROOT}/bench/gpu/ab.py" --cli "${CLI}" --lib "${LIB}" \
    --lib-a "/tmp/cm-ab/${rev}-build/kernels/libcompilemask_cuda.so" \
    --cli-a "/tmp/cm-ab/${rev}-build/tools/cli/compilemask" \
    --examples "${ROOT}/examples" --workloads "${WORKLOADS}" --out "${OUT}/${rev}" \
    --lens "${BENCH_LENS:-32768}" --masks "${MASKS}" ${AB_ARGS:-} > "${OUT}/ab_${rev}.log" 2>&1
  note "ab: A = ${rev}: exit $? in $(elapsed "${start}")"
  cat "${OUT}/${rev}/ab.md" >> "${OUT}/ab.md" 2>/dev/null
done
cat "${SUMMARY}" "${OUT}/ab.md"
