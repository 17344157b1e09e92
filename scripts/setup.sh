#!/usr/bin/env bash
# Installs what CompileMask needs on a Debian/Ubuntu machine: compilers, CMake, Ninja, GoogleTest,
# Google Benchmark, zlib, libpng, Python with numpy and the pinned nanobind, and the pinned
# CUTLASS headers for the GPU kernels. Idempotent: a second run installs nothing and needs no
# network.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(build-essential cmake ninja-build clang libgtest-dev libbenchmark-dev zlib1g-dev
          libpng-dev python3 python3-pip)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "setup: system packages present"
fi

# numpy: used by the tests that compare the examples with shared/reference/workloads.py.
if python3 -c "import numpy" 2>/dev/null; then
  echo "setup: numpy present"
else
  echo "setup: installing numpy"
  # A Debian-managed Python refuses plain pip installs (PEP 668); fall back to the override.
  python3 -m pip install --quiet numpy ||
    python3 -m pip install --quiet --break-system-packages numpy
fi

# nanobind, pinned as pyproject.toml pins it: the dev preset builds the Python modules with it
# (CM_BUILD_PYTHON=AUTO), so that CI compiles the kernels' binding too.
if python3 -c "import nanobind, sys; sys.exit(nanobind.__version__ != '3.1.0')" 2>/dev/null; then
  echo "setup: nanobind 3.1.0 present"
else
  echo "setup: installing nanobind 3.1.0"
  python3 -m pip install --quiet nanobind==3.1.0 ||
    python3 -m pip install --quiet --break-system-packages nanobind==3.1.0
fi

if [[ -f "$root/scripts/fetch_cutlass.sh" ]]; then
  bash "$root/scripts/fetch_cutlass.sh"
fi
