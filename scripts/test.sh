#!/usr/bin/env bash
# The project's test command (README, CI): builds and tests three configurations.
#   1. dev preset: everything (GPU kernels compile and link when nvcc exists, and the Python
#      modules when nanobind does); all tests except the fuzz label (gpu tests skip with a
#      message on machines without a Hopper GPU).
#   1b. the Python package, built with pip into a venv, and its CPU tests, which also load the
#      dev build's kernel binding (tests/python/test_dev_modules.py).
#   2. fuzz preset (clang): the libFuzzer targets (mask parser, descriptor reader, specialize
#      against the brute-force oracle), each run for a bounded time (label fuzz).
#   3. asan-ubsan preset: the host code under sanitizers; labels unit and error.
# Expects scripts/setup.sh to have run. Prints the time of each stage.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

started=$SECONDS
stage() { echo; echo "==== $* (at $((SECONDS - started)) s)"; }

stage "dev: configure and build"
cmake --preset dev
cmake --build --preset dev
stage "dev: tests (all labels except fuzz; gpu tests skip with a message without a GPU)"
ctest --preset dev

stage "python: build the package into a venv and run the CPU tests"
python3 -m venv build/python-venv
build/python-venv/bin/python -m pip install --quiet --upgrade pip
build/python-venv/bin/python -m pip install --quiet numpy pytest
build/python-venv/bin/python -m pip install --quiet . -C cmake.define.CM_CUDA=OFF -C build-dir=build/python
CM_DEV_MODULES="$PWD/build/dev/python" build/python-venv/bin/python -m pytest -q tests/python

stage "fuzz: configure and build the fuzzers"
cmake --preset fuzz
cmake --build --preset fuzz --target parse_fuzzer descriptor_fuzzer specialize_fuzzer
stage "fuzz: bounded fuzzing run"
ctest --preset fuzz

stage "asan-ubsan: configure and build"
cmake --preset asan-ubsan
cmake --build --preset asan-ubsan
stage "asan-ubsan: unit and error tests"
ctest --preset asan-ubsan

stage "all stages passed in $((SECONDS - started)) s"
