"""LeNet with an Input layer (fed from numpy), and MNIST batches, for the GPU net/solver tests."""
import os

import numpy as np

from caffepy.proto import caffe_pb2
from tests.conftest import ROOT, shared_path

LENET_LAYERS = """
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1" param { lr_mult: 1 }
  param { lr_mult: 2 } convolution_param { num_output: 20 kernel_size: 5 stride: 1
  weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2" param { lr_mult: 1 }
  param { lr_mult: 2 } convolution_param { num_output: 50 kernel_size: 5 stride: 1
  weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool2" top: "ip1" param { lr_mult: 1 }
  param { lr_mult: 2 } inner_product_param { num_output: 500 weight_filler { type: "xavier" }
  bias_filler { type: "constant" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2" param { lr_mult: 1 }
  param { lr_mult: 2 } inner_product_param { num_output: 10 weight_filler { type: "xavier" }
  bias_filler { type: "constant" } } }
layer { name: "accuracy" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy"
  include { phase: TEST } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
"""


def lenet_solver_param(batch, solver_type="SGD", solver_mode=caffe_pb2.SolverParameter.GPU):
    from google.protobuf import text_format
    text = ('net_param { name: "LeNet" layer { name: "data" type: "Input" top: "data" top: "label"'
            ' input_param { shape { dim: %d dim: 1 dim: 28 dim: 28 } shape { dim: %d } } } %s }'
            ' base_lr: 0.01 momentum: 0.9 weight_decay: 0.0005 lr_policy: "inv" gamma: 0.0001'
            ' power: 0.75 max_iter: 10000 display: 0 snapshot: 0 snapshot_after_train: false'
            ' random_seed: 1 type: "%s" snapshot_prefix: "/tmp/caffepy_gpu_lenet"'
            % (batch, batch, LENET_LAYERS, solver_type))
    param = caffe_pb2.SolverParameter()
    text_format.Parse(text, param)
    if solver_type != "SGD" and solver_type != "Nesterov":
        param.momentum = 0.9 if solver_type in ("AdaDelta", "Adam") else 0.0
    param.solver_mode = solver_mode
    return param


def mnist(split="train"):
    """(images float32 (N, 1, 28, 28) scaled by 1/256, labels float32) from ../shared."""
    from caffepy.data.idx import read_mnist
    d = shared_path("datasets", "mnist")
    prefix = "train" if split == "train" else "t10k"
    images, labels = read_mnist(os.path.join(d, prefix + "-images-idx3-ubyte.gz"),
                                os.path.join(d, prefix + "-labels-idx1-ubyte.gz"))
    x = images[:, None].astype(np.float32) * np.float32(0.00390625)
    return x, labels.astype(np.float32)


def synthetic(n, seed=0):
    r = np.random.default_rng(seed)
    return (r.random((n, 1, 28, 28)).astype(np.float32),
            r.integers(0, 10, n).astype(np.float32))


__all__ = ["ROOT", "lenet_solver_param", "mnist", "synthetic"]
