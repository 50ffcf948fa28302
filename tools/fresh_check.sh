#!/usr/bin/env bash
# A fresh machine, as a new user has it: clone this repository's committed HEAD into a temporary
# folder, make a new venv, point every cache (pip, numba, temporary files, the kernel libraries,
# matplotlib, XDG) at empty folders, and run the README's two commands there:
#   1. pip install -e '.[data]' && bash tools/train_lenet.sh
#   2. pip install -e '.[dev]' && bash tools/run_tests.sh
# then check that installing .[dev] left the protobuf that .[data] brought.
#
#   tools/fresh_check.sh [--keep] [--lenet-args "--max_iter 1000"] [--tests-args "-m 'not slow'"]
#
# Prints each step's wall time; exits non-zero on the first failure. System packages are not
# installed here (.ci/run does that); ../shared is linked beside the clone when it exists, as CI has it.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
keep=0; lenet_args=""; tests_args=""
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1;;
    --lenet-args) lenet_args="$2"; shift;;
    --tests-args) tests_args="$2"; shift;;
    *) echo "fresh_check: unknown argument $1"; exit 2;;
  esac
  shift
done
base=$(mktemp -d /tmp/caffepy-fresh.XXXXXX)
if [ "$keep" -eq 0 ]; then trap 'rm -rf "$base"' EXIT; fi
echo "== fresh check in $base (commit $(git -C "$here" rev-parse --short HEAD))"
git clone -q "$here" "$base/caffepy"
if [ -d "$here/../shared" ]; then ln -s "$(cd "$here/../shared" && pwd)" "$base/shared"; fi
python3 -m venv "$base/venv"
# shellcheck disable=SC1091
. "$base/venv/bin/activate"
export PIP_CACHE_DIR="$base/cache/pip" TMPDIR="$base/tmp" NUMBA_CACHE_DIR="$base/cache/numba" \
       XDG_CACHE_HOME="$base/cache/xdg" MPLCONFIGDIR="$base/cache/mpl" \
       CAFFEPY_KERNEL_CACHE="$base/cache/kernels"
mkdir -p "$TMPDIR" "$PIP_CACHE_DIR" "$NUMBA_CACHE_DIR" "$XDG_CACHE_HOME" "$MPLCONFIGDIR" \
         "$CAFFEPY_KERNEL_CACHE"
cd "$base/caffepy"
step() {
  local name=$1; shift
  local t0; t0=$(date +%s)
  echo "== $name"
  "$@"
  echo "== $name: $(( $(date +%s) - t0 )) s"
}
pip() { python -m pip "$@"; }
step "pip install -e '.[data]'" pip install -q -e '.[data]'
pb_data=$(python -c 'import google.protobuf as g; print(g.__version__)')
# shellcheck disable=SC2086
step "bash tools/train_lenet.sh $lenet_args" bash tools/train_lenet.sh $lenet_args
step "pip install -e '.[dev]'" pip install -q -e '.[dev]'
pb_dev=$(python -c 'import google.protobuf as g; print(g.__version__)')
echo "== protobuf $pb_data after .[data], $pb_dev after .[dev]"
[ "$pb_data" = "$pb_dev" ] || { echo "fresh_check: .[dev] changed protobuf"; exit 1; }
# the venv's scripts first: the tests' mpiexec is the mpich wheel's Hydra
export PATH="$base/venv/bin:$PATH"
# the arguments are shell words (``-m 'not slow'``): eval splits them once, the step's name keeps them
eval "step \"bash tools/run_tests.sh \$tests_args\" bash tools/run_tests.sh $tests_args"
echo "== fresh check passed"
