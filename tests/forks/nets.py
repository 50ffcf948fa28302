"""Run a small fork net written in a test: data layers swapped for inputs (caffepy.zoo), a forward
at batch 1, and one SGD step."""
import numpy as np
from google.protobuf import text_format

import caffepy
from caffepy import zoo
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.solvers import get_solver


def net_param(text, batch=1):
    return zoo.replace_data_layers(proto_io.read_net(text), batch_size=batch)


def fill_inputs(net, labels=10, seed=0):
    rng = np.random.default_rng(seed)
    for name in net.inputs:
        blob = net.blobs[name]
        if "label" in name:
            blob.data[...] = rng.integers(0, labels, blob.shape)
        else:
            blob.data[...] = rng.standard_normal(blob.shape)


def forward(text, phase=caffe_pb2.TEST, labels=10, batch=1):
    caffepy.set_random_seed(0)
    net = Net(net_param(text, batch), phase)
    fill_inputs(net, labels)
    net.forward()
    for out in net.outputs:
        assert np.all(np.isfinite(net.blobs[out].data)), out
    return net


def train_step(text, labels=10, batch=2, lr=0.01):
    """One SGD step in the TRAIN phase; returns (loss, largest parameter change)."""
    param = net_param(text, batch)
    solver = get_solver('net_param { %s } base_lr: %g lr_policy: "fixed" momentum: 0.9 '
                        'max_iter: 1 display: 0 random_seed: 1 snapshot_after_train: false'
                        % (text_format.MessageToString(param), lr), dtype=np.float64)
    fill_inputs(solver.net, labels)
    before = [p.data.copy() for p in solver.net.learnable_params]
    solver.step(1)
    loss = float(solver.net.blobs[solver.net.outputs[0]].data.sum())
    change = max(float(np.abs(p.data - b).max())
                 for p, b in zip(solver.net.learnable_params, before))
    assert np.isfinite(loss) and change > 0
    return loss, change


def strict_excerpt(tmp_path, text, phase=caffe_pb2.TEST, name="excerpt.prototxt"):
    """Write a fork net excerpt to ``tmp_path / name``, check that ``caffepy summary --strict``
    builds it (every layer built, every fork field computed), and return it built as a Net in
    ``phase``."""
    from caffepy.cli import main
    path = tmp_path / name
    path.write_text(text)
    assert main(["summary", "--strict", str(path)]) in (0, None)
    return Net(str(path), phase)
