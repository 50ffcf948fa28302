"""The nets of bench_cpu.py: caffepy training nets fed by DummyData, and torch models.

LeNet (MNIST, batch 64) and CIFAR10-quick (batch 100) are written here as prototxt;
CaffeNet is models/caffenet's deploy net at batch 16 with gaussian weights (std 0.01) (its
Softmax "prob" stays, beside the loss);
GoogLeNet (BVLC) and ResNet-50 (Kaiming He's) are the zoo's deploy prototxts at ``batch``
(``ZOO_BATCH`` by default), read from ../shared/modelzoo (``CAFFEPY_ZOO`` names another root)
or, when that is absent, from models/<net>/<net>_deploy.prototxt (the same layers, as
bench_infer.py reads them). Every net gets a DummyData layer (gaussian data, constant label 1)
in place of its input and a SoftmaxWithLoss on the classifier; a zoo net's Softmax "prob" is
dropped, its BatchNorm layers lose ``use_global_stats`` (so that they use batch statistics, as
in a train_val net: the default in TRAIN), and a convolution or inner product without a
weight filler gets ``msra`` / ``xavier`` (ResNet-50's deploy file has no fillers).

``build_torch`` gives the hand-written torch.nn models of LeNet, CIFAR10-quick and CaffeNet;
the zoo nets have none: bench_cpu.py converts their caffepy net (torch_from_caffe.py).
"""
import os

import numpy as np
from google.protobuf import text_format

from caffepy.net import Net
from caffepy.proto import caffe_pb2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = os.environ.get("CAFFEPY_ZOO", os.path.join(ROOT, "..", "shared", "modelzoo"))
ZOO_FILES = {"googlenet": "bvlc/models/bvlc_googlenet/deploy.prototxt",
             "resnet50": "KaimingHe__deep-residual-networks/prototxt/ResNet-50-deploy.prototxt"}
ZOO_BATCH = 8


def _data(n, c, h, w):
    return ('layer { name: "data" type: "DummyData" top: "data" top: "label" dummy_data_param {'
            ' data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 }'
            ' shape { dim: %d dim: %d dim: %d dim: %d } shape { dim: %d } } }\n' % (n, c, h, w, n))


def _conv(name, bottom, n, k, pad=0, std=None):
    filler = 'type: "gaussian" std: %g' % std if std else 'type: "xavier"'
    return ('layer { name: "%s" type: "Convolution" bottom: "%s" top: "%s" convolution_param {'
            ' num_output: %d kernel_size: %d pad: %d stride: 1 weight_filler { %s }'
            ' bias_filler { type: "constant" } } }\n' % (name, bottom, name, n, k, pad, filler))


def _pool(name, bottom, method, k, s):
    return ('layer { name: "%s" type: "Pooling" bottom: "%s" top: "%s" pooling_param {'
            ' pool: %s kernel_size: %d stride: %d } }\n' % (name, bottom, name, method, k, s))


def _ip(name, bottom, n, std=None):
    filler = 'type: "gaussian" std: %g' % std if std else 'type: "xavier"'
    return ('layer { name: "%s" type: "InnerProduct" bottom: "%s" top: "%s" inner_product_param {'
            ' num_output: %d weight_filler { %s } bias_filler { type: "constant" } } }\n'
            % (name, bottom, name, n, filler))


def _relu(name, blob):
    return 'layer { name: "%s" type: "ReLU" bottom: "%s" top: "%s" }\n' % (name, blob, blob)


def _loss(bottom):
    return ('layer { name: "loss" type: "SoftmaxWithLoss" bottom: "%s" bottom: "label"'
            ' top: "loss" }\n' % bottom)


LENET = ('name: "LeNet"\n' + _data(64, 1, 28, 28) + _conv("conv1", "data", 20, 5)
         + _pool("pool1", "conv1", "MAX", 2, 2) + _conv("conv2", "pool1", 50, 5)
         + _pool("pool2", "conv2", "MAX", 2, 2) + _ip("ip1", "pool2", 500) + _relu("relu1", "ip1")
         + _ip("ip2", "ip1", 10) + _loss("ip2"))

CIFAR10_QUICK = ('name: "CIFAR10_quick"\n' + _data(100, 3, 32, 32)
                 + _conv("conv1", "data", 32, 5, 2, 0.0001) + _pool("pool1", "conv1", "MAX", 3, 2)
                 + _relu("relu1", "pool1") + _conv("conv2", "pool1", 32, 5, 2, 0.01)
                 + _relu("relu2", "conv2") + _pool("pool2", "conv2", "AVE", 3, 2)
                 + _conv("conv3", "pool2", 64, 5, 2, 0.01) + _relu("relu3", "conv3")
                 + _pool("pool3", "conv3", "AVE", 3, 2) + _ip("ip1", "pool3", 64, 0.1)
                 + _ip("ip2", "ip1", 10, 0.1) + _loss("ip2"))


def parse(text):
    """The NetParameter of prototxt ``text``."""
    param = caffe_pb2.NetParameter()
    text_format.Parse(text, param)
    return param


def _parse(path):
    with open(path) as f:
        return parse(f.read())


def _text(name, data, layers):
    return ('name: "%s"\n' % name + data
            + "".join("layer { %s }\n" % text_format.MessageToString(l, as_one_line=True)
                      for l in layers))


def _caffenet(batch=16):
    """models/caffenet's deploy net fed by DummyData, with a SoftmaxWithLoss on fc8."""
    param = _parse(os.path.join(ROOT, "models", "caffenet", "caffenet_deploy.prototxt"))
    body = [l for l in param.layer if l.type != "Input"]
    for layer in body:          # the deploy file has no fillers: gaussian weights, zero biases
        if layer.type in ("Convolution", "InnerProduct"):
            p = layer.convolution_param if layer.type == "Convolution" else \
                layer.inner_product_param
            p.weight_filler.type, p.weight_filler.std = "gaussian", 0.01
    return _text("CaffeNet", _data(batch, 3, 227, 227), body) + _loss("fc8")


def zoo_path(name):
    path = os.path.join(ZOO, ZOO_FILES[name])
    if os.path.exists(path):
        return path
    return os.path.join(ROOT, "models", name, "%s_deploy.prototxt" % name)


def _zoo_train(name, batch):
    """The zoo deploy net ``name`` as a training net at ``batch`` (see the module docstring)."""
    param = _parse(zoo_path(name))
    inputs = [l for l in param.layer if l.type == "Input"]
    if inputs:
        shape = list(inputs[0].input_param.shape[0].dim)
    else:                       # legacy input / input_dim (or input_shape) fields
        shape = list(param.input_shape[0].dim) if len(param.input_shape) else \
            list(param.input_dim)
    prob = [l for l in param.layer if l.type == "Softmax"]
    if len(prob) != 1:
        raise ValueError("%s: expected one Softmax layer, found %d" % (name, len(prob)))
    body = [l for l in param.layer if l.type != "Input" and l is not prob[0]]
    for layer in body:
        if layer.type in ("Convolution", "InnerProduct"):
            p = layer.convolution_param if layer.type == "Convolution" else \
                layer.inner_product_param
            if not p.HasField("weight_filler"):
                p.weight_filler.type = "msra" if layer.type == "Convolution" else "xavier"
        elif layer.type == "BatchNorm":
            layer.batch_norm_param.ClearField("use_global_stats")
    return (_text(param.name, _data(batch, *shape[1:]), body) + _loss(prob[0].bottom[0]))


NETS = ("lenet", "cifar10_quick", "caffenet", "googlenet", "resnet50")


def net_text(name, batch=ZOO_BATCH):
    """The training prototxt of ``name`` (``batch``: the zoo nets' only)."""
    if name == "lenet":
        return LENET
    if name == "cifar10_quick":
        return CIFAR10_QUICK
    if name == "caffenet":
        return _caffenet()
    if name in ZOO_FILES:
        return _zoo_train(name, batch)
    raise ValueError("unknown net %r (one of %s)" % (name, ", ".join(NETS)))


def build_caffepy(name, batch=ZOO_BATCH, dropout=True, dtype=np.float32):
    """The caffepy TRAIN Net of ``name``; ``dropout=False`` sets every dropout_ratio to 0 (a
    deterministic step, for comparing with torch)."""
    param = parse(net_text(name, batch))
    if not dropout:
        for layer in param.layer:
            if layer.type == "Dropout":
                layer.dropout_param.dropout_ratio = 0.0
    return Net(param, caffe_pb2.TRAIN, dtype=dtype)


def build_torch(name):
    """(hand-written torch.nn model, input shape) of LeNet, CIFAR10-quick or CaffeNet."""
    import torch.nn as nn
    if name == "lenet":
        model = nn.Sequential(
            nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2, ceil_mode=True), nn.Conv2d(20, 50, 5),
            nn.MaxPool2d(2, 2, ceil_mode=True), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(True),
            nn.Linear(500, 10))
        return model, (64, 1, 28, 28)
    if name == "caffenet":
        lrn = lambda: nn.LocalResponseNorm(5, 1e-4, 0.75)  # noqa: E731
        model = nn.Sequential(
            nn.Conv2d(3, 96, 11, 4), nn.ReLU(True), nn.MaxPool2d(3, 2, ceil_mode=True), lrn(),
            nn.Conv2d(96, 256, 5, padding=2, groups=2), nn.ReLU(True),
            nn.MaxPool2d(3, 2, ceil_mode=True), lrn(),
            nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(True),
            nn.Conv2d(384, 384, 3, padding=1, groups=2), nn.ReLU(True),
            nn.Conv2d(384, 256, 3, padding=1, groups=2), nn.ReLU(True),
            nn.MaxPool2d(3, 2, ceil_mode=True), nn.Flatten(),
            nn.Linear(9216, 4096), nn.ReLU(True), nn.Dropout(0.5),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(0.5), nn.Linear(4096, 1000))
        return model, (16, 3, 227, 227)
    if name == "cifar10_quick":
        model = nn.Sequential(
            nn.Conv2d(3, 32, 5, padding=2), nn.MaxPool2d(3, 2, ceil_mode=True), nn.ReLU(True),
            nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(True), nn.AvgPool2d(3, 2, ceil_mode=True),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(True), nn.AvgPool2d(3, 2, ceil_mode=True),
            nn.Flatten(), nn.Linear(1024, 64), nn.Linear(64, 10))
        return model, (100, 3, 32, 32)
    raise ValueError("no hand-written torch model of %r" % name)
