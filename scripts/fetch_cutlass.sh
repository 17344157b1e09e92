#!/usr/bin/env bash
# Installs the CUTLASS/CuTe C++ headers (header-only) into third_party/cutlass/include from the
# pinned nvidia-cutlass wheel on PyPI. Idempotent: does nothing when the pinned version is there.
# Usage: scripts/fetch_cutlass.sh            (run from anywhere; needs pip, unzip or python3)
set -euo pipefail

readonly VERSION="4.2.0.0"
readonly SHA256="f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly ROOT
readonly DEST="${ROOT}/third_party/cutlass"
readonly STAMP="${DEST}/VERSION"

if [[ -f "${STAMP}" && "$(cat "${STAMP}")" == "${VERSION}" && -f "${DEST}/include/cute/tensor.hpp" ]]; then
  echo "fetch_cutlass: CUTLASS ${VERSION} already in ${DEST}"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

python3 -m pip download --quiet --no-deps --only-binary=:all: -d "${work}" "nvidia-cutlass==${VERSION}"
wheel="$(ls "${work}"/nvidia_cutlass-"${VERSION}"-*.whl)"
echo "${SHA256}  ${wheel}" | sha256sum --check --quiet -

# Only the C++ headers are needed; the wheel keeps them as package data of cutlass_library.
python3 - "${wheel}" "${work}/unpacked" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    members = [m for m in z.namelist() if m.startswith("cutlass_library/source/include/")]
    if not members:
        sys.exit("fetch_cutlass: the wheel holds no cutlass_library/source/include headers")
    z.extractall(sys.argv[2], members)
PY

rm -rf "${DEST}"
mkdir -p "${DEST}"
mv "${work}/unpacked/cutlass_library/source/include" "${DEST}/include"
echo "${VERSION}" > "${STAMP}"
echo "fetch_cutlass: installed CUTLASS ${VERSION} headers into ${DEST}/include"
