"""The behaviours of pycaffe's test_net.py, plus the batching and MemoryData helpers."""
import collections

import numpy as np
import pytest

import caffepy as caffe
from caffepy.errors import NetError
from tests.pycaffe.nets import DEPLOY, simple_net_text, write

NUM_OUTPUT = 13


@pytest.fixture
def net_file(tmp_path):
    return write(tmp_path, "net.prototxt", simple_net_text(NUM_OUTPUT))


@pytest.fixture
def net(net_file):
    n = caffe.Net(net_file, caffe.TRAIN)
    n.blobs["label"].data[...] = np.random.randint(NUM_OUTPUT, size=n.blobs["label"].data.shape)
    return n


def test_blobs_outlive_the_net(net):
    params = [p for ps in net.params.values() for p in ps]
    blobs = list(net.blobs.values())
    del net
    assert np.isfinite(sum(float(b.data.sum() + b.diff.sum()) for b in params + blobs))


def test_layer_dict_and_layer_surface(net):
    assert list(net.layer_dict) == list(net._layer_names)
    for i, name in enumerate(net._layer_names):
        assert net.layer_dict[name].type == net.layers[i].type
    assert [l.type for l in net.layers] == ["DummyData", "Convolution", "InnerProduct", "SoftmaxWithLoss"]
    conv = net.layer_dict["conv"]
    assert [b.shape for b in conv.blobs] == [(11, 2, 2, 2), (11,)]
    assert conv.blobs[0] is net.params["conv"][0]


def test_forward_backward_and_start_end(net):
    net.forward()
    net.backward()
    conv, ip = net.blobs["conv"], net.blobs["ip_blob"]
    conv.data[...] = np.random.uniform(size=conv.data.shape)
    out = net.forward(start="ip", end="ip")
    assert "ip_blob" in out
    w, b = net.params["ip"][0].data, net.params["ip"][1].data
    expect = conv.data.reshape(len(conv.data), -1) @ w.T + b
    np.testing.assert_allclose(ip.data, expect, rtol=1e-4, atol=1e-4)
    ip.diff[...] = np.random.uniform(size=ip.diff.shape)
    grads = net.backward(start="ip", end="ip")
    assert "conv" in grads
    np.testing.assert_allclose(conv.diff.reshape(len(conv.diff), -1), ip.diff @ w, rtol=1e-4, atol=1e-4)


def test_clear_param_diffs(net):
    net.forward()
    net.backward()
    diff = net.params["conv"][0].diff
    assert diff.max() > 0
    net.clear_param_diffs()
    assert (diff == 0).all()


def test_inputs_outputs_names(net):
    assert net.inputs == []
    assert net.outputs == ["loss"]
    assert net.top_names == collections.OrderedDict(
        [("data", ["data", "label"]), ("conv", ["conv"]), ("ip", ["ip_blob"]), ("loss", ["loss"])])
    assert net.bottom_names == collections.OrderedDict(
        [("data", []), ("conv", ["data"]), ("ip", ["conv"]), ("loss", ["ip_blob", "label"])])
    assert net.blob_loss_weights["loss"] == 1.0
    assert net._blob_names == list(net.blobs)


def test_save_and_read_every_constructor(net, net_file, tmp_path):
    weights = str(tmp_path / "w.caffemodel")
    net.save(weights)
    for other in (caffe.Net(net_file, weights, caffe.TRAIN),
                  caffe.Net(net_file, caffe.TRAIN, weights=weights),
                  caffe.Net(net_file, phase=caffe.TRAIN, weights=weights, level=0, stages=[])):
        for name in net.params:
            for a, b in zip(net.params[name], other.params[name]):
                assert np.array_equal(a.data, b.data)


def test_save_and_load_hdf5(net, net_file, tmp_path):
    pytest.importorskip("h5py")
    path = str(tmp_path / "w.h5")
    net.save_hdf5(path)
    other = caffe.Net(net_file, caffe.TRAIN)
    other.load_hdf5(path)
    for name in net.params:
        for a, b in zip(net.params[name], other.params[name]):
            assert np.array_equal(a.data, b.data)


def test_share_with_and_copy_from(net, net_file, tmp_path):
    other = caffe.Net(net_file, caffe.TEST)
    other.share_with(net)
    net.params["ip"][0].data[...] = 7
    assert (other.params["ip"][0].data == 7).all()
    weights = str(tmp_path / "w.caffemodel")
    net.save(weights)
    third = caffe.Net(net_file, caffe.TEST)
    third.copy_from(weights)
    assert (third.params["ip"][0].data == 7).all()


LEVELS = """
layer { name: "data" type: "DummyData" top: "data" dummy_data_param { shape { dim: 1 dim: 1 dim: 10 dim: 10 } } }
layer { name: "NoLevel" type: "InnerProduct" bottom: "data" top: "NoLevel" inner_product_param { num_output: 1 } }
layer { name: "Level0Only" type: "InnerProduct" bottom: "data" top: "Level0Only"
  include { min_level: 0 max_level: 0 } inner_product_param { num_output: 1 } }
layer { name: "Level1Only" type: "InnerProduct" bottom: "data" top: "Level1Only"
  include { min_level: 1 max_level: 1 } inner_product_param { num_output: 1 } }
layer { name: "Level>=0" type: "InnerProduct" bottom: "data" top: "Level>=0"
  include { min_level: 0 } inner_product_param { num_output: 1 } }
layer { name: "Level>=1" type: "InnerProduct" bottom: "data" top: "Level>=1"
  include { min_level: 1 } inner_product_param { num_output: 1 } }
"""

STAGES = """
layer { name: "data" type: "DummyData" top: "data" dummy_data_param { shape { dim: 1 dim: 1 dim: 10 dim: 10 } } }
layer { name: "A" type: "InnerProduct" bottom: "data" top: "A" include { stage: "A" } inner_product_param { num_output: 1 } }
layer { name: "B" type: "InnerProduct" bottom: "data" top: "B" include { stage: "B" } inner_product_param { num_output: 1 } }
layer { name: "AorB" type: "InnerProduct" bottom: "data" top: "AorB" include { stage: "A" } include { stage: "B" }
  inner_product_param { num_output: 1 } }
layer { name: "AandB" type: "InnerProduct" bottom: "data" top: "AandB" include { stage: "A" stage: "B" }
  inner_product_param { num_output: 1 } }
"""

ALL_IN_ONE = """
layer { name: "train_data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 1 dim: 1 dim: 10 dim: 10 } shape { dim: 1 dim: 1 dim: 1 dim: 1 } }
  include { phase: TRAIN stage: "train" } }
layer { name: "val_data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 1 dim: 1 dim: 10 dim: 10 } shape { dim: 1 dim: 1 dim: 1 dim: 1 } }
  include { phase: TEST stage: "val" } }
layer { name: "deploy_data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 10 dim: 10 } }
  include { phase: TEST stage: "deploy" } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 2 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss"
  include: { phase: TRAIN stage: "train" } include: { phase: TEST stage: "val" } }
layer { name: "pred" type: "Softmax" bottom: "ip" top: "pred" include: { phase: TEST stage: "deploy" } }
"""


def _non_data(net):
    return [b for b in net.blobs if "data" not in b]


@pytest.mark.parametrize("level,blobs", [(0, ["NoLevel", "Level0Only", "Level>=0"]),
                                         (1, ["NoLevel", "Level1Only", "Level>=0", "Level>=1"])])
def test_levels(tmp_path, level, blobs):
    path = write(tmp_path, "levels.prototxt", LEVELS)
    assert _non_data(caffe.Net(path, caffe.TEST, level=level)) == blobs


@pytest.mark.parametrize("stages,blobs", [(["A"], ["A", "AorB"]), (["B"], ["B", "AorB"]),
                                          (["A", "B"], ["A", "B", "AorB", "AandB"])])
def test_stages(tmp_path, stages, blobs):
    path = write(tmp_path, "stages.prototxt", STAGES)
    assert _non_data(caffe.Net(path, caffe.TEST, stages=stages)) == blobs


@pytest.mark.parametrize("phase,stage,outputs", [(caffe.TRAIN, "train", ["loss"]),
                                                 (caffe.TEST, "val", ["loss"]),
                                                 (caffe.TEST, "deploy", ["pred"])])
def test_all_in_one(tmp_path, phase, stage, outputs):
    net = caffe.Net(write(tmp_path, "all.prototxt", ALL_IN_ONE), phase, stages=[stage])
    assert list(net.blobs["data"].shape) == [1, 1, 10, 10]
    assert net.outputs == outputs


def test_forward_all_pads_the_last_batch(tmp_path):
    net = caffe.Net(write(tmp_path, "deploy.prototxt", DEPLOY), caffe.TEST)
    x = np.random.default_rng(0).standard_normal((10, 3, 8, 8)).astype(np.float32)
    out = net.forward_all(data=x, blobs=["ip"])
    assert set(out) == {"prob", "ip"}
    assert out["prob"].shape == (10, 5) and out["ip"].shape == (10, 5)
    one = net.forward(data=np.concatenate([x[8:10], x[8:10]]))["prob"]
    np.testing.assert_allclose(out["prob"][8:], one[:2], rtol=1e-5)
    np.testing.assert_allclose(out["prob"].sum(axis=1), 1.0, rtol=1e-5)


def test_forward_backward_all(tmp_path):
    net = caffe.Net(write(tmp_path, "deploy.prototxt", "force_backward: true\n" + DEPLOY), caffe.TEST)
    x = np.random.default_rng(1).standard_normal((6, 3, 8, 8)).astype(np.float32)
    d = np.ones((6, 5), np.float32)
    outs, diffs = net.forward_backward_all(data=x, prob=d)
    assert outs["prob"].shape == (6, 5) and diffs["data"].shape == (6, 3, 8, 8)
    # softmax output's gradient of sum(prob) is zero up to rounding
    assert np.abs(diffs["data"]).max() < 1e-4


def test_forward_checks_inputs(tmp_path):
    net = caffe.Net(write(tmp_path, "deploy.prototxt", DEPLOY), caffe.TEST)
    with pytest.raises(NetError, match="do not match net inputs"):
        net.forward(other=np.zeros((4, 3, 8, 8)))
    with pytest.raises(NetError, match="not batch sized"):
        net.forward(data=np.zeros((3, 3, 8, 8)))


MEMORY = """
layer { name: 'data' type: 'MemoryData' top: 'data' top: 'label'
  memory_data_param { batch_size: 2 channels: 3 height: 4 width: 5 } }
layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' inner_product_param { num_output: 2 } }
layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }
"""


def test_set_input_arrays_feeds_memory_data(tmp_path):
    net = caffe.Net(write(tmp_path, "mem.prototxt", MEMORY), caffe.TRAIN)
    data = np.arange(4 * 60, dtype=np.float32).reshape(4, 3, 4, 5)
    labels = np.array([0, 1, 1, 0], dtype=np.float32)
    net.set_input_arrays(data, labels)
    for batch in (0, 1, 0):
        net.forward()
        assert np.array_equal(net.blobs["data"].data, data[2 * batch:2 * batch + 2])
        assert np.array_equal(net.blobs["label"].data.ravel(), labels[2 * batch:2 * batch + 2])


@pytest.mark.parametrize("data,labels,msg", [
    (np.zeros((4, 3, 4, 5), np.float64), np.zeros(4, np.float32), "must be float32"),
    (np.zeros((4, 3, 5, 4), np.float32).transpose(0, 1, 3, 2), np.zeros(4, np.float32), "C contiguous"),
    (np.zeros((4, 2, 4, 5), np.float32), np.zeros(4, np.float32), "wrong number of channels"),
    (np.zeros((4, 3, 4), np.float32), np.zeros(4, np.float32), "must be 4-d"),
    (np.zeros((4, 3, 4, 5), np.float32), np.zeros(2, np.float32), "same first dimension"),
    (np.zeros((3, 3, 4, 5), np.float32), np.zeros(3, np.float32), "multiple of batch_size"),
])
def test_set_input_arrays_checks(tmp_path, data, labels, msg):
    net = caffe.Net(write(tmp_path, "mem.prototxt", MEMORY), caffe.TRAIN)
    with pytest.raises(NetError, match=msg) as e:
        net.set_input_arrays(data, labels)
    assert "layer 'data' (MemoryData)" in str(e.value) and "\n" not in str(e.value)


def test_set_input_arrays_needs_memory_data(tmp_path):
    net = caffe.Net(write(tmp_path, "deploy.prototxt", DEPLOY), caffe.TEST)
    with pytest.raises(NetError, match="needs a MemoryData layer"):
        net.set_input_arrays(np.zeros((4, 3, 8, 8), np.float32), np.zeros(4, np.float32))


def test_blob_surface():
    b = caffe.Blob((2, 3, 4, 5))
    assert (b.num, b.channels, b.height, b.width, b.count) == (2, 3, 4, 5, 120)
    b.reshape(6, 7)
    assert b.shape == (6, 7) and b.data.shape == (6, 7) and b.diff.shape == (6, 7)
    assert (b.num, b.channels, b.height, b.width) == (6, 7, 1, 1)


def test_module_functions():
    types = caffe.layer_type_list()
    assert types == sorted(types) and "Convolution" in types and "Python" in types
    assert caffe.TRAIN == 0 and caffe.TEST == 1 and isinstance(caffe.__version__, str)
    caffe.set_mode_cpu()
    caffe.set_device(0)
    caffe.set_random_seed(3)
    t = caffe.Timer()
    t.start()
    t.stop()
    assert t.ms >= 0
    caffe.set_solver_count(1)
    caffe.set_solver_rank(0)
    assert caffe.solver_count() == 1 and caffe.solver_rank() == 0 and caffe.has_nccl() is False
    caffe.init_log(2)
    caffe.pycaffe.log("hello")
    caffe.init_log(0)
