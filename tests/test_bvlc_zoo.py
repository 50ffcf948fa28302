"""Every BVLC model / example net builds (each phase it declares, data layers swapped for Input);
the classic nets run forward and backward at a small batch; the V0/V1 history files upgrade and build."""
import glob
import os

import numpy as np
import pytest

import caffepy
from caffepy import zoo
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from tests.conftest import SHARED

BVLC = os.path.join(SHARED, "modelzoo", "bvlc")
HISTORY = os.path.join(SHARED, "modelzoo", "bvlc_history")
pytestmark = pytest.mark.usefixtures("user_pyloss")   # examples/pycaffe/linreg.prototxt: pyloss


def _net_files(root):
    if not os.path.isdir(root):
        return []
    out = []
    for path in sorted(glob.glob(os.path.join(root, "**", "*.prototxt"), recursive=True)):
        with open(path, errors="replace") as f:
            text = f.read()
        if "layer" in text and "base_lr" not in text:      # nets, not solvers
            out.append(os.path.relpath(path, root))
    return out


def _states(param):
    """(phase, stages) pairs the file declares: each phase, with each stage its include rules name."""
    phases = {r.phase for lp in param.layer for r in list(lp.include) + list(lp.exclude)
              if r.HasField("phase")} or {caffe_pb2.TEST}
    out = []
    for phase in sorted(phases):
        stages = sorted({s for lp in param.layer for r in lp.include if r.phase == phase or
                         not r.HasField("phase") for s in r.stage})
        out.extend((phase, [s]) for s in stages) if stages else out.append((phase, []))
    return out


def _build(path, phase, stages=(), batch_size=1):
    param = zoo.replace_data_layers(proto_io.read_net(path), batch_size=batch_size)
    caffepy.set_random_seed(0)
    return Net(param, phase, stages=stages)


@pytest.mark.slow
@pytest.mark.parametrize("rel", _net_files(BVLC) or ["<absent>"])
def test_bvlc_net_builds_each_phase(rel):
    if rel == "<absent>":
        pytest.skip("needs ../shared/modelzoo/bvlc")
    path = os.path.join(BVLC, rel)
    for phase, stages in _states(proto_io.read_net(path)):
        net = _build(path, phase, stages)
        assert net.layers, "%s built no layers" % rel


CLASSICS = [
    ("examples/mnist/lenet_train_test.prototxt", 4),
    ("examples/cifar10/cifar10_quick_train_test.prototxt", 2),
    ("examples/cifar10/cifar10_full_train_test.prototxt", 2),
    ("models/bvlc_reference_caffenet/train_val.prototxt", 1),
    ("models/bvlc_reference_caffenet/deploy.prototxt", 1),
    ("models/bvlc_alexnet/train_val.prototxt", 1),
    ("models/bvlc_alexnet/deploy.prototxt", 1),
    ("models/bvlc_googlenet/train_val.prototxt", 1),
    ("models/bvlc_googlenet/deploy.prototxt", 1),
]


@pytest.mark.slow
@pytest.mark.parametrize("rel,batch", CLASSICS)
def test_classic_nets_forward_backward(rel, batch):
    path = os.path.join(BVLC, rel)
    if not os.path.exists(path):
        pytest.skip("needs ../shared/modelzoo/bvlc")
    param = proto_io.read_net(path)
    phase = caffe_pb2.TRAIN if any(r.phase == caffe_pb2.TRAIN for lp in param.layer
                                   for r in lp.include) else caffe_pb2.TEST
    param = zoo.replace_data_layers(param, batch_size=batch)
    if phase == caffe_pb2.TEST:
        param.force_backward = True
    caffepy.set_random_seed(0)
    net = Net(param, phase)
    rng = np.random.default_rng(0)
    for name in net.inputs:
        blob = net.blobs[name]
        if "label" in name:
            blob.data[...] = rng.integers(0, 10, blob.shape)
        else:
            blob.data[...] = rng.standard_normal(blob.shape)
    loss = net.forward_from_to()
    assert np.isfinite(loss)
    if net.blob_loss_weights and any(net.blob_loss_weights.values()):
        net.backward_from_to()
    else:   # deploy net: no loss, so back-propagate random output gradients (force_backward)
        net.backward(**{o: rng.standard_normal(net.blobs[o].shape) for o in net.outputs})
    for out in net.outputs:
        assert np.all(np.isfinite(net.blobs[out].data)), out
    grads = [p.diff for p in net.learnable_params]
    assert grads and all(np.all(np.isfinite(g)) for g in grads)
    assert sum(float(np.abs(g).sum()) for g in grads) > 0


@pytest.mark.slow
@pytest.mark.parametrize("rel", _net_files(HISTORY) or ["<absent>"])
def test_history_files_upgrade_and_build(rel):
    if rel == "<absent>":
        pytest.skip("needs ../shared/modelzoo/bvlc_history")
    path = os.path.join(HISTORY, rel)
    param = proto_io.read_net(path)
    assert all(lp.type for lp in param.layer) and not len(param.layers)
    for phase, stages in _states(param):
        assert _build(path, phase, stages).layers
