#!/usr/bin/env bash
# Gather what tools/gpu_check.sh needs on a GPU machine that reaches no network, into .gpu/ (git
# ignores it): pycuda's sdist (2026.1: builds against CUDA 13's cuCtxCreate) and the wheels of its
# pure-Python needs and of lmdb for CPython 3.12 x86-64, and the MNIST IDX files.
#   bash tools/gpu_carry.sh [MNIST_DIR]      (default ../shared/datasets/mnist)
set -euo pipefail
cd "$(dirname "$0")/.."
mnist=${1:-../shared/datasets/mnist}
mkdir -p .gpu/whl .gpu/mnist
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
python3 -m pip download -q --no-deps -d .gpu pycuda==2026.1
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .gpu/whl pytools platformdirs mako siphash24 typing-extensions lmdb
cp "$mnist"/*-ubyte* .gpu/mnist/
du -sh .gpu
