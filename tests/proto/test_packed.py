"""Packed blob I/O: .caffemodel / .solverstate written and read as bytes, parsed by stock protobuf."""
import os
import stat

import numpy as np
import pytest

import caffepy
from caffepy.proto import caffe_pb2, io as proto_io, packed
from caffepy.solvers import state as state_io
from caffepy.net.weights import net_to_proto

NET = """name: "tiny"
layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 5 dim: 5 } } }
layer { name: "conv" type: "Convolution" bottom: "x" top: "c"
  param { lr_mult: 1 } param { lr_mult: 2 }
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "gaussian" std: 1 }
                      bias_filler { type: "gaussian" std: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "c" top: "y"
  inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
"""


def _slow_blobproto(arr, diff=None):
    """The message as protobuf's Python API builds it (float lists): the reference."""
    bp = caffe_pb2.BlobProto()
    bp.shape.dim.extend(arr.shape)
    bp.data.extend(arr.ravel().tolist())
    if diff is not None:
        bp.diff.extend(diff.ravel().tolist())
    return bp


@pytest.fixture
def net(tmp_path):
    path = tmp_path / "net.prototxt"
    path.write_text(NET)
    n = caffepy.Net(str(path), caffepy.TEST)
    rng = np.random.RandomState(3)
    for b in n.learnable_params:
        b.diff[...] = rng.standard_normal(b.shape)
    n.learnable_params[0].data.flat[0] = np.float32(np.nan)
    n.learnable_params[0].data.flat[1] = np.float32(-0.0)
    return n


@pytest.mark.parametrize("write_diff", [False, True])
def test_caffemodel_parses_with_stock_protobuf(net, tmp_path, write_diff):
    path = str(tmp_path / "w.caffemodel")
    net.save(path, write_diff=write_diff)
    got = caffe_pb2.NetParameter()
    with open(path, "rb") as f:
        got.ParseFromString(f.read())
    want = net_to_proto(net, write_diff)
    for lp, layer in zip(want.layer, net.layers):       # the float-list reference
        del lp.blobs[:]
        for b in layer.blobs:
            lp.blobs.add().CopyFrom(_slow_blobproto(b.data, b.diff if write_diff else None))
    assert got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)
    other = caffepy.Net(str(tmp_path / "net.prototxt"), caffepy.TEST)
    other.copy_from(path)
    for a, b in zip(net.learnable_params, other.learnable_params):
        assert a.data.tobytes() == b.data.tobytes()          # bit for bit, NaN and -0 included


def test_unpacked_encoding_still_reads():
    values = np.array([1.5, -2.25, 3e-39], np.float32)
    raw = b"".join(b"\x2d" + v.tobytes() for v in values)       # field 5, wire type 5, per value
    bp = caffe_pb2.BlobProto()
    bp.ParseFromString(raw)
    assert packed.field_array(bp, "data").tobytes() == values.tobytes()


def test_double_fields_round_trip():
    arr = np.random.RandomState(0).standard_normal((3, 4))
    bp = packed.blobproto(arr, double=True, diff=arr * 2)
    assert np.array_equal(np.asarray(bp.double_data).reshape(3, 4), arr)
    assert packed.field_array(bp, "double_diff", np.float64).tobytes() == (arr * 2).ravel().tobytes()
    assert packed.field_array(bp, "data") is None


@pytest.mark.parametrize("history_dtype", [np.float32, np.float64])
def test_solverstate_round_trip(tmp_path, history_dtype):
    rng = np.random.RandomState(1)
    hist = [rng.standard_normal(s).astype(history_dtype) for s in ((4, 3), (7,), (0,))]
    path = str(tmp_path / "s.solverstate")
    state_io.write_state(path, 12, "w.caffemodel", 2, hist)
    ref = caffe_pb2.SolverState()
    proto_io.read_binary(path, ref)
    assert ref.iter == 12 and ref.learned_net == "w.caffemodel" and ref.current_step == 2
    field = "double_data" if history_dtype == np.float64 else "data"
    assert list(getattr(ref.history[0], field)) == hist[0].ravel().tolist()
    it, learned, step, got = state_io.read_state(path, history_dtype)
    assert (it, learned, step) == (12, "w.caffemodel", 2)
    for a, b in zip(hist, got):
        assert a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_files_follow_the_umask(net, tmp_path, mask):
    old = os.umask(mask)
    try:
        paths = [str(tmp_path / "w.caffemodel"), str(tmp_path / "s.solverstate"),
                 str(tmp_path / "t.bin")]
        net.save(paths[0])
        state_io.write_state(paths[1], 1, paths[0], 0, [])
        proto_io.atomic_write(paths[2], b"x")
    finally:
        os.umask(old)
    for p in paths:
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o666 & ~mask


def test_split_net_reads_values_apart(net, tmp_path):
    path = str(tmp_path / "w.caffemodel")
    net.save(path)
    raw = open(path, "rb").read()
    stripped, values = packed.split_net(raw)
    assert len(stripped) < 2000 and sorted(values) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert values[(1, 0)]["data"].tobytes() == net.learnable_params[0].data.tobytes()
    msg = caffe_pb2.NetParameter.FromString(stripped)
    assert list(msg.layer[1].blobs[0].shape.dim) == [4, 3, 3, 3] and not len(msg.layer[1].blobs[0].data)


def test_v1_and_duplicate_names_take_the_message_path(net, tmp_path):
    """V1 ``layers`` (upgraded by copying messages) and repeated layer names parse the whole
    message; the values are the same."""
    v1 = caffe_pb2.NetParameter(name="tiny")
    for name, layer in (("conv", net.layers[1]), ("ip", net.layers[2])):
        lp = v1.layers.add(name=name, type=caffe_pb2.V1LayerParameter.CONVOLUTION if name == "conv"
                           else caffe_pb2.V1LayerParameter.INNER_PRODUCT)
        for b in layer.blobs:
            lp.blobs.add().CopyFrom(b.to_proto())
    path = tmp_path / "v1.caffemodel"
    path.write_bytes(v1.SerializeToString())
    assert packed.split_net(path.read_bytes()) is None
    dup = net_to_proto(net)
    dup.layer.add().CopyFrom(dup.layer[2])         # 'ip' twice: the last copy wins, as in Caffe
    dup.layer[3].blobs[1].data[0] = 42.0
    dpath = tmp_path / "dup.caffemodel"
    dpath.write_bytes(dup.SerializeToString())
    for p, bias0 in ((path, net.learnable_params[3].data[0]), (dpath, 42.0)):
        other = caffepy.Net(str(tmp_path / "net.prototxt"), caffepy.TEST)
        other.copy_from(str(p))
        assert other.learnable_params[0].data.tobytes() == net.learnable_params[0].data.tobytes()
        assert other.learnable_params[3].data[0] == np.float32(bias0)


BIG = """name: "big"
layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 1 dim: 600 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "a"
  inner_product_param { num_output: 600 weight_filler { type: "gaussian" std: 1 } } }
layer { name: "%s" type: "InnerProduct" bottom: "a" top: "y"
  inner_product_param { num_output: 10 weight_filler { type: "gaussian" std: 1 }
                        bias_filler { type: "constant" value: 0.5 } } }
"""


@pytest.mark.parametrize("which", ["small", "mapped"])
def test_weights_in_the_constructor_skip_the_fill(net, tmp_path, monkeypatch, which):
    """``Net(proto, TEST, weights=...)`` reads the file first and leaves the layers it provides
    unfilled (each is overwritten): their values equal copy_from's bit for bit; a layer the file
    lacks (renamed for fine-tuning) is filled as ever. "mapped": a file over 1 MB is read through
    a memory map."""
    from caffepy import fillers
    if which == "small":
        proto, path = str(tmp_path / "net.prototxt"), str(tmp_path / "w.caffemodel")
        net.save(path)
        new_proto = tmp_path / "tuned.prototxt"
        new_proto.write_text(NET.replace('name: "ip"', 'name: "ip_new"'))
    else:
        (tmp_path / "big.prototxt").write_text(BIG % "ip2")
        proto, path = str(tmp_path / "big.prototxt"), str(tmp_path / "w.caffemodel")
        net = caffepy.Net(proto, caffepy.TEST)
        net.save(path)
        assert os.path.getsize(path) > (1 << 20)
        new_proto = tmp_path / "tuned.prototxt"
        new_proto.write_text(BIG % "ip_new")
    filled = []
    fill = fillers.Filler.fill
    monkeypatch.setattr(fillers.Filler, "fill", lambda self, blob: (filled.append(blob.shape),
                                                                   fill(self, blob))[1])
    loaded = caffepy.Net(proto, caffepy.TEST, weights=path)
    assert filled == []
    copied = caffepy.Net(proto, caffepy.TEST)
    copied.copy_from(path)
    for a, b, c in zip(net.learnable_params, loaded.learnable_params, copied.learnable_params):
        assert a.data.tobytes() == b.data.tobytes() == c.data.tobytes()
    filled.clear()
    tuned = caffepy.Net(str(new_proto), caffepy.TEST, weights=path)
    last = tuned.layers[-1]
    assert filled == [b.shape for b in last.blobs]      # only the new layer, weights then bias
    assert tuned.learnable_params[0].data.tobytes() == net.learnable_params[0].data.tobytes()
    assert np.any(last.blobs[0].data != 0)


def test_weights_in_the_constructor_keep_caffes_errors(net, tmp_path):
    """A file whose layer has another shape is still refused with Caffe's message, naming it."""
    path = str(tmp_path / "w.caffemodel")
    net.save(path)
    other = tmp_path / "other.prototxt"
    other.write_text(NET.replace("num_output: 4", "num_output: 5"))
    from caffepy.errors import CaffeError
    with pytest.raises(CaffeError, match=r"w\.caffemodel: Cannot copy param 0 weights "
                                                 r"from layer 'conv'; shape mismatch"):
        caffepy.Net(str(other), caffepy.TEST, weights=path)
    with pytest.raises(CaffeError, match=r"nothere\.caffemodel: cannot read"):
        caffepy.Net(str(other), caffepy.TEST, weights=str(tmp_path / "nothere.caffemodel"))
