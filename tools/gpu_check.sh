#!/usr/bin/env bash
# One command for a GPU machine with no network (after bash tools/gpu_carry.sh here; carry .gpu):
#   bash tools/gpu_check.sh [TOTAL_SECONDS]        (default 470: every stage ends inside it)
#   STAGES="install tests bench" BENCH_ARGS=--profile bash tools/gpu_check.sh 200   (a subset)
# Stages, each with a time limit (cut to what is left of the total), a log under $OUT (or
# ./gpu_logs) and one summary line; a stage that fails does not stop the next:
#   env      nvidia-smi, nvcc, python, torch, the cuDNN library and its version
#   install  the carried wheels, then pycuda: the carried wheel .gpu/pycuda-*.whl when there is
#            one, else built from its sdist (16 cores) and the wheel copied to $OUT, to be
#            carried next time
#   tests    the GPU tests: every GPU layer forward/backward against the CPU (float32, float64),
#            on-GPU gradient checks, cuBLAS, the kernel cache (one family compiled once from 8
#            threads, tests/gpu/test_device_cache.py), Philox, fused solver updates; the -n 6
#            processes share caffepy's cubin cache (CAFFEPY_KERNEL_CACHE, fresh per run)
#   lenet    LeNet on MNIST in GPU mode (Caffe's solver: 10,000 iterations, tested every 2,500)
#            and its last test accuracy (>= 99%?)
#   time     (when named in STAGES) per-layer forward / backward times of GoogLeNet and ResNet-50
#            on the GPU (caffepy time, synchronised per layer)
#   bench    training images/s and batch-1 inference latency of LeNet, CIFAR10-quick, CaffeNet,
#            GoogLeNet and ResNet-50 against PyTorch eager FP32 (benchmarks/bench_gpu.py)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
SITE=/tmp/site
TOTAL=${1:-470}
summary() { echo "== $1: $2" | tee -a "$OUT/summary.txt"; }

stage() {   # stage NAME SECONDS FUNCTION
  local name=$1 limit=$2 fn=$3
  local t0=$SECONDS left=$((TOTAL - SECONDS - 5))
  if [ "$left" -lt 10 ]; then summary "$name" "skipped: no time left"; return 1; fi
  [ "$limit" -gt "$left" ] && limit=$left
  timeout "$limit" bash -c "$fn" > "$OUT/$name.log" 2>&1
  local rc=$?
  summary "$name" "rc=$rc in $((SECONDS - t0)) s; $(grep -E "passed|failed|accuracy|images/s|error" "$OUT/$name.log" | tail -1 | cut -c1-160)"
  return $rc
}

env_info() {
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -2
  python3 -c "import sys, numpy, torch, google.protobuf as pb; print(sys.version.split()[0], 'numpy', numpy.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0), 'protobuf', pb.__version__)"
  python3 -c "import caffepy.gpu.cudnn as c; print('cudnn', c.library_path(), c.version())"
}

install() {
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .gpu/whl/*.whl || return 1
  if ls .gpu/pycuda-*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target "$SITE" .gpu/pycuda-*.whl || return 1
    python3 -c "import pycuda.driver as d; d.init(); print('pycuda', __import__('pycuda').VERSION_TEXT, d.Device(0).name())"
    return
  fi
  rm -rf /tmp/pycuda-build && mkdir -p /tmp/pycuda-build && tar xzf .gpu/pycuda-*.tar.gz -C /tmp/pycuda-build
  (cd /tmp/pycuda-build/pycuda-* \
    && python3 configure.py --cuda-root="${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}" \
         --no-cuda-enable-curand \
    && MAKEFLAGS=-j16 python3 setup.py build_ext --parallel 16 \
    && python3 setup.py -q bdist_wheel \
    && python3 -m pip install -q --no-index --no-deps --target "$SITE" dist/pycuda-*.whl \
    && cp dist/pycuda-*.whl "$OUT/") || return 1
  python3 -c "import pycuda.driver as d; d.init(); print('pycuda', __import__('pycuda').VERSION_TEXT, d.Device(0).name())"
}

gpu_tests() {
  mkdir -p /tmp/shared/datasets && ln -sfn "$PWD/.gpu/mnist" /tmp/shared/datasets/mnist
  CAFFEPY_SHARED=/tmp/shared CAFFEPY_KERNEL_CACHE=$(mktemp -d) \
    python3 -m pytest -q -p no:cacheprovider --timeout=120 -n 6 -rfE --tb=short \
    -m "gpu" tests/gpu tests/layers tests/solvers tests/dist/test_gpu_workers.py
}

lenet() {
  python3 -m caffepy prepare_mnist --mnist_dir .gpu/mnist --output_dir data/mnist || return 1
  python3 -m caffepy train --solver models/lenet/lenet_solver.prototxt --gpu 0 \
    --test_interval 2500 --snapshot_prefix /tmp/lenet_gpu --display 1000 2>&1 | tee /tmp/lenet.log
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
  python3 benchmarks/bench_gpu.py --iters 20 ${BENCH_ARGS:-}
}

layer_times() {   # Caffe's per-layer timing (synchronised around each layer) of the bench nets
  for net in ${TIME_NETS:-googlenet resnet50}; do
    python3 -c "import sys; sys.path.insert(0, '.'); import benchmarks.bench_gpu as b; open('/tmp/$net.prototxt', 'w').write(b.caffepy_prototxt('$net', b.BATCH['$net']))" || return 1
    python3 -m caffepy time --model /tmp/$net.prototxt --gpu 0 --iterations 10 2>&1 \
      | sed -n 's/.*caffe.cpp:[0-9]*\] *//p' | grep -E "forward:|backward:|Average" || return 1
  done
}

export OUT SITE
export -f env_info install gpu_tests lenet bench layer_times
: > "$OUT/summary.txt"
STAGES=${STAGES:-env install tests bench lenet}
for s in $STAGES; do
  case $s in
    env) stage env 30 env_info ;;
    install) stage install 180 install ;;
    tests) stage tests 150 gpu_tests ;;
    bench) stage bench 150 bench ;;
    lenet) stage lenet 120 lenet ;;
    time) stage time 120 layer_times ;;
  esac
done
cat "$OUT/summary.txt"
