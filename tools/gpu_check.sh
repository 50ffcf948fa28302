#!/usr/bin/env bash
# One command for a GPU machine with no network (after bash tools/gpu_carry.sh here; carry .gpu):
#   bash tools/gpu_check.sh
# Stages, each with a time limit, a log under $OUT (or ./gpu_logs) and one summary line; a stage
# that fails does not stop the next:
#   env      nvidia-smi, nvcc, python, torch
#   install  the carried wheels, then pycuda built from its sdist (16 cores)
#   tests    the GPU tests: every GPU layer forward/backward against the CPU (float32, float64),
#            on-GPU gradient checks, cuBLAS, kernel cache, Philox, fused solver updates
#   lenet    LeNet on MNIST in GPU mode (5,000 iterations) and its test accuracy (>= 99%?)
#   bench    training images/s of LeNet, CaffeNet, GoogLeNet, ResNet-50 against PyTorch eager
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
SITE=/tmp/site
summary() { echo "== $1: $2" | tee -a "$OUT/summary.txt"; }

stage() {   # stage NAME SECONDS FUNCTION
  local name=$1 limit=$2 fn=$3
  local t0=$SECONDS
  timeout "$limit" bash -c "$fn" > "$OUT/$name.log" 2>&1
  local rc=$?
  summary "$name" "rc=$rc in $((SECONDS - t0)) s; $(grep -E "passed|failed|accuracy|images/s|error" "$OUT/$name.log" | tail -1 | cut -c1-160)"
  return $rc
}

env_info() {
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -2
  python3 -c "import sys, numpy, torch; print(sys.version.split()[0], 'numpy', numpy.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))"
}

install() {
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .gpu/whl/*.whl || return 1
  rm -rf /tmp/pycuda-build && mkdir -p /tmp/pycuda-build && tar xzf .gpu/pycuda-*.tar.gz -C /tmp/pycuda-build
  (cd /tmp/pycuda-build/pycuda-* \
    && python3 configure.py --cuda-root="${CUDA_HOME:-/usr/local/cuda}" \
    && MAKEFLAGS=-j16 python3 setup.py build_ext --parallel 16 \
    && python3 -m pip install -q --no-index --no-deps --no-build-isolation --target "$SITE" .) || return 1
  python3 -c "import pycuda.driver as d; d.init(); print('pycuda', __import__('pycuda').VERSION_TEXT, d.Device(0).name())"
}

gpu_tests() {
  python3 -m pytest -q -p no:cacheprovider --timeout=600 -x -m "gpu" tests/gpu tests/layers tests/solvers
}

lenet() {
  python3 -m caffepy prepare_mnist --mnist_dir .gpu/mnist --output_dir data/mnist || return 1
  python3 -m caffepy train --solver models/lenet/lenet_solver.prototxt --gpu 0 --max_iter 5000 \
    --test_interval 5000 --snapshot_prefix /tmp/lenet_gpu --display 500 2>&1 | tee /tmp/lenet.log
  python3 - <<'PY'
import re, sys
acc = re.findall(r"Test net output #0: accuracy = ([0-9.]+)", open("/tmp/lenet.log").read())
if not acc:
    sys.exit("error: no test accuracy in the log")
print("final test accuracy %s (>= 0.99: %s)" % (acc[-1], "yes" if float(acc[-1]) >= 0.99 else "no"))
sys.exit(0 if float(acc[-1]) >= 0.99 else 1)
PY
}

bench() {
  python3 benchmarks/bench_gpu.py --nets lenet,caffenet,googlenet,resnet50 --iters 20
}

export OUT SITE
export -f env_info install gpu_tests lenet bench
: > "$OUT/summary.txt"
stage env 60 env_info
stage install 300 install
stage tests 240 gpu_tests
stage lenet 150 lenet
stage bench 150 bench
cat "$OUT/summary.txt"
