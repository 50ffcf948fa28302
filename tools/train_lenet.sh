#!/usr/bin/env sh
# The main job: LeNet on MNIST, as Caffe's examples/mnist/{create_mnist,train_lenet}.sh.
#   tools/train_lenet.sh [extra caffepy train flags, e.g. --gpu 0]
# MNIST comes from $MNIST_DIR, ../shared/datasets/mnist, or the canonical mirrors (MD5-checked);
# the LMDBs go to data/mnist/ and snapshots to data/mnist/lenet_iter_*.
set -e
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
$PY -m caffepy prepare_mnist --output_dir data/mnist
$PY -m caffepy train --solver models/lenet/lenet_solver.prototxt "$@"
