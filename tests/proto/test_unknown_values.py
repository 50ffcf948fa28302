"""Enum values a fork adds (unknown to caffepy's schema): an error naming file, line, field and
value by default; with --ignore-unknown-fields / strict=False dropped with a WARNING where the
field changes no math (hints), and still an error, saying why, where it may change the math."""
import logging

import pytest

from caffepy.cli import main as cli_main
from caffepy.errors import ProtoError
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io

NET = """name: "forked"
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 1 dim: 2 dim: 5 dim: 5 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 3 kernel_size: 3 engine: NNPACK_X }
}
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: %s kernel_size: 2 } }
"""


def test_unknown_value_is_an_error_by_default(tmp_path):
    path = tmp_path / "forked.prototxt"
    path.write_text(NET % "MAX")
    with pytest.raises(ProtoError) as e:
        Net(str(path), phase=caffe_pb2.TEST)
    msg = str(e.value)
    assert msg.startswith("%s:5:60: no value named NNPACK_X in enum ConvolutionParameter.Engine of field "
                          "ConvolutionParameter.engine" % path)
    assert "(layer 'conv1')" in msg and "changes no math" in msg and "\n" not in msg


def test_lenient_drops_a_hint_value_with_a_warning(tmp_path, caplog):
    path = tmp_path / "forked.prototxt"
    path.write_text(NET % "AVE")
    with caplog.at_level(logging.INFO, logger="caffepy.proto.io"):
        net = Net(str(path), phase=caffe_pb2.TEST, strict=False)
    assert net.blobs["pool1"].shape == (1, 3, 2, 2)
    warn = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warn) == 1
    assert "5:60: ConvolutionParameter.engine (layer 'conv1') = NNPACK_X" in warn[0].getMessage()


def test_a_value_that_may_change_the_math_stays_an_error(tmp_path):
    path = tmp_path / "forked.prototxt"
    path.write_text(NET % "STOCHASTIC_MAX")
    for strict in (True, False):
        with pytest.raises(ProtoError) as e:
            Net(str(path), phase=caffe_pb2.TEST, strict=strict)
        if not strict:
            assert str(e.value) == (
                "%s:8:25: no value named STOCHASTIC_MAX in enum PoolingParameter.PoolMethod of "
                "field PoolingParameter.pool (layer 'pool1'); it may change the math, so it is an "
                "error even with --ignore-unknown-fields" % path)


def test_v1_layer_type_value_a_fork_adds():
    text = 'layers { name: "x" type: CONVOLUTION_FANCY bottom: "a" top: "b" }'
    for strict in (True, False):
        with pytest.raises(ProtoError, match=r"<string>:1:26: no value named CONVOLUTION_FANCY in "
                                             r"enum V1LayerParameter\.LayerType of field "
                                             r"V1LayerParameter\.type \(layer 'x'\)"):
            io.read_net(text, strict=strict)


def test_binary_file_with_unknown_enum_numbers(tmp_path):
    net = caffe_pb2.NetParameter()
    layer = net.layers.add()
    layer.name, layer.bottom[:], layer.top[:] = "odd", ["a"], ["b"]
    # V1LayerParameter.type (field 5, varint) = 127: a number no V1 type (BVLC, curated or harvested) has
    inner = layer.SerializeToString() + bytes([5 << 3, 127])
    raw = bytes([2 << 3 | 2, len(inner)]) + inner
    path = tmp_path / "odd.binaryproto"
    path.write_bytes(raw)
    for strict in (True, False):
        with pytest.raises(ProtoError, match=r"no value numbered 127 in enum V1LayerParameter"
                                             r"\.LayerType of field V1LayerParameter\.type "
                                             r"\(layer 'odd'\)"):
            io.read_net(str(path), strict=strict)
    # a hint's number (ConvolutionParameter.engine, field 15) passes when lenient
    cp = caffe_pb2.ConvolutionParameter(num_output=1).SerializeToString() + bytes([15 << 3, 9])
    lp = caffe_pb2.LayerParameter(name="c", type="Convolution", bottom=["a"], top=["b"])
    inner = lp.SerializeToString() + _field(106, cp)
    path2 = tmp_path / "engine.binaryproto"
    path2.write_bytes(_field(100, inner))
    with pytest.raises(ProtoError, match=r"no value numbered 9 .* field ConvolutionParameter\.engine"):
        io.read_net(str(path2), strict=True)
    got = io.read_net(str(path2), strict=False)
    assert got.layer[0].convolution_param.num_output == 1


def _field(number, payload):
    """A length-delimited protobuf field: tag, varint length, bytes."""
    out = bytearray(_varint(number << 3 | 2))
    out += _varint(len(payload))
    return bytes(out) + payload


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def test_cli_flag_on_an_unknown_hint_value(tmp_path, capsys):
    path = tmp_path / "forked.prototxt"
    path.write_text(NET % "MAX")
    assert cli_main(["summary", "--strict", str(path)]) == 1
    assert "NNPACK_X in enum ConvolutionParameter.Engine" in capsys.readouterr().err
    assert cli_main(["summary", str(path)]) == 0
    assert "NNPACK_X" in capsys.readouterr().err
    assert cli_main(["summary", "--ignore-unknown-fields", str(path)]) == 0
