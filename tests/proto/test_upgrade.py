"""Legacy formats: V0 and V1 nets, data-transform fields, net inputs, BatchNorm params, solvers."""
import glob
import json
import os

import pytest

from caffepy.errors import ProtoError
from caffepy.proto import caffe_pb2, io, upgrade
from tests.conftest import shared_path

V0_NET = """
name: "tiny"
input: "data"
input_dim: 2 input_dim: 3 input_dim: 8 input_dim: 8
layers {
  layer { name: "pad1" type: "padding" pad: 2 }
  bottom: "data" top: "pad1"
}
layers {
  layer {
    name: "conv1" type: "conv" num_output: 4 kernelsize: 3 stride: 2 group: 1
    weight_filler { type: "gaussian" std: 0.01 }
    blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
  }
  bottom: "pad1" top: "conv1"
}
layers {
  layer { name: "pool1" type: "pool" pool: AVE kernelsize: 2 stride: 2 }
  bottom: "conv1" top: "pool1"
}
layers {
  layer { name: "drop" type: "dropout" dropout_ratio: 0.3 local_size: 5 }
  bottom: "pool1" top: "pool1"
}
"""

V1_NET = """
name: "v1"
layers {
  name: "data" type: DATA top: "data" top: "label"
  data_param { source: "db" batch_size: 4 scale: 0.5 mean_file: "m.binaryproto" mirror: true }
  include { phase: TRAIN }
}
layers {
  name: "ip" type: INNER_PRODUCT bottom: "data" top: "ip"
  blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
  param: "shared_w" blob_share_mode: PERMISSIVE
  inner_product_param { num_output: 10 }
}
layers { name: "loss" type: SOFTMAX_LOSS bottom: "ip" bottom: "label" top: "loss" loss_weight: 2 }
"""


def _net(text, **kw):
    return io.read_net(text, **kw)


def test_v0_net_upgrades_like_caffe():
    net = _net(V0_NET)
    assert not net.layers and not net.input and not net.input_dim
    assert [l.type for l in net.layer] == ["Input", "Convolution", "Pooling", "Dropout"]
    inp, conv, pool, drop = net.layer
    assert inp.name == "input" and list(inp.top) == ["data"]
    assert list(inp.input_param.shape[0].dim) == [2, 3, 8, 8]
    # the padding layer is folded into conv1, which now reads the padding layer's input
    assert list(conv.bottom) == ["data"] and list(conv.convolution_param.pad) == [2]
    cp = conv.convolution_param
    assert (cp.num_output, list(cp.kernel_size), list(cp.stride), cp.group) == (4, [3], [2], 1)
    assert cp.weight_filler.type == "gaussian"
    assert [(p.lr_mult, p.decay_mult) for p in conv.param] == [(1, 1), (2, 0)]
    pp = pool.pooling_param
    assert (pp.pool, pp.kernel_size, pp.stride) == (caffe_pb2.PoolingParameter.AVE, 2, 2)
    assert drop.dropout_param.dropout_ratio == pytest.approx(0.3)
    assert not drop.HasField("lrn_param")    # local_size does not apply to dropout: dropped


def test_v0_unknown_type_and_bad_padding_are_errors():
    with pytest.raises(ProtoError, match="unknown V0 layer type \"warp\""):
        _net('layers { layer { name: "w" type: "warp" } }')
    bad = ('input: "data" layers { layer { name: "p" type: "padding" pad: 1 } bottom: "data" '
           'top: "p" } layers { layer { name: "r" type: "relu" } bottom: "p" top: "r" }')
    with pytest.raises(ProtoError, match="only conv and pool"):
        _net(bad)


def test_v1_net_upgrades_like_caffe():
    net = _net(V1_NET)
    data, ip, loss = net.layer
    assert (data.type, ip.type, loss.type) == ("Data", "InnerProduct", "SoftmaxWithLoss")
    assert not data.data_param.HasField("scale") and data.transform_param.scale == 0.5
    assert data.transform_param.mean_file == "m.binaryproto" and data.transform_param.mirror
    assert data.data_param.source == "db" and data.include[0].phase == caffe_pb2.TRAIN
    assert [(p.name, p.share_mode, p.lr_mult, p.decay_mult) for p in ip.param] == [
        ("shared_w", caffe_pb2.ParamSpec.PERMISSIVE, 1, 1), ("", 0, 2, 0)]
    assert ip.inner_product_param.num_output == 10
    assert list(loss.loss_weight) == [2]


def test_net_input_shape_becomes_first_input_layer():
    net = _net('input: "a" input: "b" input_shape { dim: 1 dim: 2 } input_shape { dim: 3 } '
               'layer { name: "r" type: "ReLU" bottom: "a" top: "r" }')
    assert [l.name for l in net.layer] == ["input", "r"]
    assert list(net.layer[0].top) == ["a", "b"]
    assert [list(s.dim) for s in net.layer[0].input_param.shape] == [[1, 2], [3]]


def test_bad_input_dim_count_is_an_error():
    with pytest.raises(ProtoError, match="need 4 each"):
        _net('input: "a" input_dim: 1 input_dim: 2')


def test_five_input_dims_an_input_are_the_c3d_forks_5d_inputs():
    net = _net('input: "a" input: "b" ' + " ".join("input_dim: %d" % d for d in
                                                    (1, 3, 16, 112, 112, 1, 1, 8, 7, 7)))
    assert [list(s.dim) for s in net.layer[0].input_param.shape] == \
        [[1, 3, 16, 112, 112], [1, 1, 8, 7, 7]]
    with pytest.raises(ProtoError, match="or 5 each"):
        _net('input: "a" ' + " ".join("input_dim: 1" for _ in range(6)))


def test_input_without_shape_is_dropped():
    net = _net('input: "data" layer { name: "r" type: "ReLU" bottom: "data" top: "r" }')
    assert [l.name for l in net.layer] == ["r"] and not net.input


def test_batch_norm_three_params_frozen():
    net = _net('layer { name: "bn" type: "BatchNorm" param { lr_mult: 1 } param { lr_mult: 1 } '
               'param { lr_mult: 1 decay_mult: 3 } }')
    assert [(p.lr_mult, p.decay_mult) for p in net.layer[0].param] == [(0, 0)] * 3
    two = _net('layer { name: "bn" type: "BatchNorm" param { lr_mult: 1 } param { lr_mult: 1 } }')
    assert [p.lr_mult for p in two.layer[0].param] == [1, 1]


def test_current_net_is_left_alone():
    text = 'name: "n" layer { name: "r" type: "ReLU" bottom: "x" top: "x" }'
    raw = _net(text, upgrade=False)
    assert not upgrade.net_needs_upgrade(raw)
    assert _net(text) == raw


def test_binary_v1_net_upgrades_too():
    raw = _net(V1_NET, upgrade=False)
    assert upgrade.net_needs_upgrade(raw)
    assert io.read_net(raw.SerializeToString()) == _net(V1_NET)


@pytest.mark.parametrize("enum,name", [("SGD", "SGD"), ("NESTEROV", "Nesterov"),
                                       ("ADAGRAD", "AdaGrad"), ("RMSPROP", "RMSProp"),
                                       ("ADADELTA", "AdaDelta"), ("ADAM", "Adam")])
def test_solver_type_enum_becomes_string(enum, name):
    sp = io.read_solver("base_lr: 0.1\nsolver_type: %s\n" % enum)
    assert sp.type == name and not sp.HasField("solver_type")


def test_solver_type_and_type_together_is_an_error():
    with pytest.raises(ProtoError, match="both solver_type"):
        io.read_solver('solver_type: ADAM\ntype: "Adam"\n')


def test_solver_inline_net_upgraded():
    sp = io.read_solver("net_param { %s }" % V1_NET)
    assert [l.type for l in sp.net_param.layer] == ["Data", "InnerProduct", "SoftmaxWithLoss"]


def _legacy_zoo_files():
    root = shared_path("modelzoo")
    with open(os.path.join(root, "CATALOG.json")) as f:
        catalog = json.load(f)
    legacy = {e["path"] for e in catalog if e["status"] in ("old-V0-format", "old-V1-format")
              or any("solver_type" in n or "net-level input" in n for n in e["notes"])}
    legacy |= {os.path.relpath(p, root) for p in
               glob.glob(os.path.join(root, "bvlc_history", "**", "*.prototxt"), recursive=True)}
    return root, sorted(legacy), {e["path"]: e["kind"] for e in catalog}


@pytest.mark.slow
def test_legacy_zoo_files_upgrade(caplog):
    root, paths, kinds = _legacy_zoo_files()
    assert len(paths) > 60
    for rel in paths:
        path = os.path.join(root, rel)
        if kinds.get(rel) == "solver" or "solver" in os.path.basename(rel):
            sp = io.read_solver(path)
            assert not sp.HasField("solver_type"), rel
            continue
        net = io.read_net(path)
        assert not net.layers and not net.input and not net.input_dim, rel
        assert net.layer and all(l.type for l in net.layer), rel
        assert not upgrade.net_needs_upgrade(net), rel
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]


V1_QUOTED = ('name: "q"\nlayers {\n  name: "data"\n  type: "%s"\n  top: "data"\n%s}\n'
             'layers {\n  name: "relu"\n  type: %s\n  bottom: "data"\n  top: "out"\n}\n')


@pytest.mark.parametrize("data_type, body, relu_type, how", [
    ("DummyData", '  dummy_data_param { shape { dim: 1 } }\n', "RELU", "their V1 values"),
    ("Input", '  input_param { shape { dim: 1 } }\n', "RELU", "current 'layer' blocks"),
    ("DummyData", '  dummy_data_param { shape { dim: 1 } }\n', '"ReLU"', "their V1 values"),
])
def test_v1_blocks_with_a_quoted_current_type_are_read_when_lenient(data_type, body, relu_type,
                                                                     how, caplog):
    from caffepy.errors import ProtoError
    from caffepy.proto import unknown_fields
    text = V1_QUOTED % (data_type, body, relu_type)
    with pytest.raises(ProtoError, match='has no value named "%s"' % data_type):
        io.read_net(text, strict=True)
    with unknown_fields.lenient(), caplog.at_level("WARNING"):
        net = io.read_net(text)
    assert [(lp.name, lp.type) for lp in net.layer] == [("data", data_type), ("relu", "ReLU")]
    assert net.layer[0].top == ["data"] and net.layer[1].bottom == ["data"]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "give their type as a current name in quotes" in warnings[0]
    assert ("read as %s: 4:9 \"%s\"" % (how, data_type)) in warnings[0]
