"""Reading/writing: round trips (text, binary, BlobProto ↔ Blob), text/binary detection, errors."""
import glob
import os

import numpy as np
import pytest
from google.protobuf import text_format

from caffepy.blob import Blob
from caffepy.errors import ProtoError
from caffepy.proto import caffe_pb2, io
from tests.conftest import shared_path

NET = """name: "rt"
layer {
  name: "data"
  type: "Input"
  top: "data"
  input_param { shape { dim: 1 dim: 3 dim: 4 dim: 4 } }
}
layer {
  name: "conv1"
  type: "Convolution"
  bottom: "data"
  top: "conv1"
  param { lr_mult: 1 }
  convolution_param { num_output: 2 kernel_size: 3 weight_filler { type: "xavier" } }
}
layer {
  name: "pool1"
  type: "Pooling"
  bottom: "conv1"
  top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 ceil_mode: false }
}
"""


def _bvlc_prototxts():
    root = shared_path("modelzoo", "bvlc")
    return sorted(glob.glob(os.path.join(root, "**", "*.prototxt"), recursive=True))


def _weighted_net():
    net = io.read_net(NET)
    rng = np.random.RandomState(0)
    w = Blob((2, 3, 3, 3))
    w.data[...] = rng.randn(*w.shape)
    net.layer[1].blobs.add().CopyFrom(w.to_proto())
    net.layer[1].blobs.add().CopyFrom(Blob((2,)).to_proto())
    return net


def test_text_round_trip_is_lossless():
    net = io.read_net(NET)
    text = io.to_text(net)
    again = io.read_net(text)
    assert again == net and io.to_text(again) == text
    assert net.layer[2].pooling_param.HasField("ceil_mode")
    assert net.layer[2].pooling_param.ceil_mode is False


def test_zoo_text_round_trip():
    files = _bvlc_prototxts()
    assert files
    for path in files:
        msg = caffe_pb2.SolverParameter() if "solver" in os.path.basename(path) \
            else caffe_pb2.NetParameter()
        io.read_text(path, msg)
        text = text_format.MessageToString(msg)
        again = io.parse_text(text, type(msg)(), filename=path)
        assert again == msg and text_format.MessageToString(again) == text, path


def test_binary_round_trip_bit_identical(tmp_path):
    net = _weighted_net()
    data = net.SerializeToString()
    path = tmp_path / "w.caffemodel"
    io.write_binary(net, path)
    assert path.read_bytes() == data
    back = io.read_binary(path, caffe_pb2.NetParameter())
    assert back == net and back.SerializeToString() == data
    assert io.read_net(path) == net        # detected as binary, needs no upgrade


def test_blobproto_round_trip_through_blob(tmp_path):
    rng = np.random.RandomState(1)
    blob = Blob((2, 3, 4, 5))
    blob.data[...] = rng.randn(*blob.shape)
    blob.diff[...] = rng.randn(*blob.shape)
    proto = blob.to_proto(write_diff=True)
    path = tmp_path / "mean.binaryproto"
    io.write_binary(proto, path)
    back = Blob()
    back.from_proto(io.read_binary(path, caffe_pb2.BlobProto()))
    assert back.shape == blob.shape
    np.testing.assert_array_equal(back.data, blob.data)
    np.testing.assert_array_equal(back.diff, blob.diff)
    assert back.to_proto(write_diff=True).SerializeToString() == path.read_bytes()
    dbl = Blob((3,), dtype=np.float64)
    dbl.data[...] = [1e-300, np.pi, -2.0]
    again = Blob(dtype=np.float64)
    again.from_proto(caffe_pb2.BlobProto.FromString(dbl.to_proto(double=True).SerializeToString()))
    np.testing.assert_array_equal(again.data, dbl.data)
    legacy = caffe_pb2.BlobProto(num=1, channels=2, height=1, width=2, data=[1, 2, 3, 4])
    old = Blob()
    old.from_proto(legacy)
    assert old.shape == (1, 2, 1, 2)


def test_detection_ignores_file_names(tmp_path):
    net = _weighted_net()
    swapped_bin = tmp_path / "looks_text.prototxt"
    swapped_bin.write_bytes(net.SerializeToString())
    swapped_txt = tmp_path / "looks_binary.caffemodel"
    swapped_txt.write_text(NET)
    assert io.read_net(swapped_bin) == net
    assert io.read_net(swapped_txt) == io.read_net(NET)
    assert io.is_binary_file(swapped_bin) and not io.is_binary_file(swapped_txt)
    assert io.read_net(net.SerializeToString()) == net and io.read_net(NET.encode()) == io.read_net(NET)


def test_unknown_field_error_names_file_line_column_and_layer(tmp_path):
    path = tmp_path / "net.prototxt"
    path.write_text(NET.replace("kernel_size: 3 ", "kernel_size: 3\n    foo: 1 "))
    with pytest.raises(ProtoError) as e:
        io.read_net(path)
    assert str(e.value) == ('%s:15:5: no field named "foo" in ConvolutionParameter '
                            "(layer 'conv1')" % path)
    path.write_text(NET.replace("pool: MAX", "pool: MAXIMUM"))
    with pytest.raises(ProtoError, match=r"net.prototxt:\d+:\d+: no value named MAXIMUM in enum "
                                         r"PoolingParameter.PoolMethod of field "
                                         r"PoolingParameter.pool \(layer 'pool1'\); "):
        io.read_net(path)
    with pytest.raises(ProtoError, match=r"^<string>:1:1: no field named \"bogus\" in NetParameter$"):
        io.read_net("bogus: 1\n" + NET)


def test_layer_named_after_error_and_v0_layer_found():
    with pytest.raises(ProtoError, match=r":3:3: .*\(layer 'late'\)$"):
        io.read_net('layer {\n  type: "ReLU"\n  wrong: 1\n  name: "late"\n}\n')
    with pytest.raises(ProtoError, match=r"\(layer 'old'\)$"):
        io.read_net('layers {\n  layer {\n    name: "old"\n    nope: 2\n  }\n}\n')


def test_bad_files_are_one_line_errors(tmp_path):
    with pytest.raises(ProtoError, match="no such file"):
        io.read_net(str(tmp_path / "missing.prototxt"))
    bad = tmp_path / "bad.caffemodel"
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f\x00garbage")
    with pytest.raises(ProtoError, match="not a valid binary NetParameter"):
        io.read_net(bad)
    with pytest.raises(ProtoError) as e:
        io.read_solver("base_lr: 0.1\nlr_policy: step\n")
    assert "\n" not in str(e.value) and str(e.value).startswith("<string>:2:")


def test_atomic_write_leaves_no_temp_files(tmp_path):
    io.write_text(io.read_net(NET), tmp_path / "out.prototxt")
    assert os.listdir(tmp_path) == ["out.prototxt"]
    assert io.read_net(tmp_path / "out.prototxt") == io.read_net(NET)


def test_tiny_binary_with_few_control_bytes_is_still_read():
    net = caffe_pb2.NetParameter(name="x" * 100)   # serialized: newline, "d", 100 x
    data = net.SerializeToString()
    assert not io.looks_binary(data)          # guessed as text ...
    assert io.read_net(data) == net           # ... the binary retry reads it


def test_text_in_a_legacy_encoding_reads_as_caffe_reads_it(tmp_path, caplog):
    """An editor's GBK or Latin-1 bytes in comments are skipped, as Caffe's parser skips them
    (the file was once taken for binary and refused); in a string they read as U+FFFD after one
    WARNING naming the line. A binary file with such bytes stays binary."""
    import logging
    gbk = "# 输入层的注释\n".encode("gbk")
    path = tmp_path / "gbk.prototxt"
    path.write_bytes(gbk + NET.encode() + "# 结束 caf\xe9\n".encode("latin-1", "replace"))
    assert not io.is_binary_file(path)
    with caplog.at_level(logging.WARNING, logger="caffepy.proto.io"):
        assert io.read_net(path) == io.read_net(NET)
    assert not caplog.records
    named = tmp_path / "name.prototxt"
    named.write_bytes(b'name: "caf\xe9"\n' + NET.encode().replace(b'name: ', b'# name: ', 1))
    with caplog.at_level(logging.WARNING, logger="caffepy.proto.io"):
        assert io.read_net(named).name == "caf\ufffd"
    assert [r.getMessage() for r in caplog.records] == [
        "%s:1: bytes that are not UTF-8 outside comments, read as U+FFFD" % named]
    net = _weighted_net()
    net.name = "x"
    data = net.SerializeToString() + b"\x0a\x02\xc4\xe3"       # a name field that is not UTF-8
    assert io.looks_binary(data)


@pytest.mark.parametrize("content", [b"", b"  \n\t\n"])
def test_empty_file_is_an_error(tmp_path, content):
    from caffepy.errors import ProtoError
    from caffepy.proto import io as proto_io
    path = tmp_path / "empty.caffemodel"
    path.write_bytes(content)
    with pytest.raises(ProtoError, match=r"empty\.caffemodel: empty file \(\d+ bytes\): not a NetParameter"):
        proto_io.read_net(str(path))


def test_a_singular_field_given_twice_takes_the_last_value_unless_strict(tmp_path, caplog):
    from caffepy.proto import unknown_fields
    path = tmp_path / "net.prototxt"
    path.write_text('name: "first"\n' + NET.replace("pool: MAX", "pool: MAX\n    pool: AVE"))
    with pytest.raises(ProtoError, match=r'net.prototxt:\d+:\d+: Message type "NetParameter" '
                                         r'should not have multiple "name" fields$'):
        io.read_net(path, strict=True)
    with unknown_fields.lenient(), caplog.at_level("WARNING"):
        net = io.read_net(path)
    assert net.name == "rt" and net.layer[2].pooling_param.pool == caffe_pb2.PoolingParameter.AVE
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and warnings[0].startswith(str(path)) and warnings[0].endswith(
        "2 singular field(s) given more than once, the last value taken (Caffe refuses this, "
        "--strict too): 2:1: NetParameter.name; 23:5: PoolingParameter.pool (layer 'pool1')")


def test_a_message_field_given_twice_stays_an_error(tmp_path):
    """A layer opened inside another (a closing brace left out) is not merged into it."""
    from caffepy.proto import unknown_fields
    with unknown_fields.lenient(), pytest.raises(ProtoError, match="should not have multiple"):
        io.read_net('layer { name: "a" type: "ReLU"\n'
                    '  convolution_param { num_output: 1 }\n  convolution_param { num_output: 2 }\n}\n')
