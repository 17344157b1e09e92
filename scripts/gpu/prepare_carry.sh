#!/usr/bin/env bash
# Fills third_party/ (ignored by git) with what scripts/gpu/run_all.sh needs on the GPU machine,
# which has no network: the CUTLASS headers, a copy of ../shared/reference (workloads.py), and a
# relocatable copy of this machine's GoogleTest (the GPU image may lack it), and, for
# scripts/gpu/ab_checks.sh, the tree of each git revision REV given as third_party/ab/REV.tar.
# Then pass carry: ["third_party"] to the device call. Idempotent.
#
# Usage: scripts/gpu/prepare_carry.sh [REV...]
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
for rev in "$@"; do
  git -C "${ROOT}" archive --format=tar -o "${ROOT}/third_party/ab/${rev}.tar" "${rev}"
done
du -sh "${ROOT}/third_party"
