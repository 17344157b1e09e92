#!/usr/bin/env bash
# Fills third_party/ (ignored by git) with what scripts/gpu/run_all.sh needs on the GPU machine,
# which has no network: the CUTLASS headers, a copy of ../shared/reference (workloads.py), and a
# relocatable copy of this machine's GoogleTest (the GPU image may lack it), and, for
# scripts/gpu/ab_checks.sh, one tree per argument: a git revision REV as third_party/ab/REV.tar,
# or a patch file (experiments/NAME.patch) applied to HEAD as third_party/ab/NAME.tar.
# Then pass carry: ["third_party"] to the device call. Idempotent.
#
# Usage: scripts/gpu/prepare_carry.sh [REV | PATCH ...]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
"${ROOT}/scripts/fetch_cutlass.sh"

shared="${ROOT}/../shared/reference"
[[ -f "${shared}/workloads.py" ]] || { echo "prepare_carry: ${shared}/workloads.py not found" >&2; exit 1; }
mkdir -p "${ROOT}/third_party/shared_reference"
cp "${shared}"/*.py "${ROOT}/third_party/shared_reference/"

gtest="${ROOT}/third_party/gtest"
lib=/usr/lib/x86_64-linux-gnu
if [[ -f /usr/include/gtest/gtest.h && -d "${lib}/cmake/GTest" ]]; then
  mkdir -p "${gtest}/include" "${gtest}/lib/x86_64-linux-gnu/cmake"
  cp -r /usr/include/gtest /usr/include/gmock "${gtest}/include/"
  cp "${lib}"/libgtest*.a "${lib}"/libgmock*.a "${gtest}/lib/x86_64-linux-gnu/"
  cp -r "${lib}/cmake/GTest" "${gtest}/lib/x86_64-linux-gnu/cmake/"
else
  echo "prepare_carry: no system GoogleTest to copy; the GPU build needs one there" >&2
fi

mkdir -p "${ROOT}/third_party/ab"
for tree in "$@"; do
  if [[ "${tree}" == *.patch ]]; then
    name="$(basename "${tree}" .patch)"
    patch="$(realpath "${tree}")"
    scratch="$(mktemp -d)"
    git -C "${ROOT}" archive HEAD | tar -x -C "${scratch}"
    git -C "${scratch}" apply "${patch}" ||
      { echo "prepare_carry: ${tree} does not apply to HEAD" >&2; exit 1; }
    tar -cf "${ROOT}/third_party/ab/${name}.tar" -C "${scratch}" .
    rm -rf "${scratch}"
  else
    git -C "${ROOT}" archive --format=tar -o "${ROOT}/third_party/ab/${tree}.tar" "${tree}"
  fi
done
du -sh "${ROOT}/third_party"
