"""The unknown-field policy: hints pass with an INFO line, the rest is an error unless lenient."""
import logging

import numpy as np
import pytest

from caffepy.cli import main as cli_main
from caffepy.errors import ProtoError
from caffepy.net import Net
from caffepy.proto import io, unknown_fields

NET = """name: "forked"
default_forward_type: FLOAT16
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 1 dim: 2 dim: 5 dim: 5 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1" forward_type: FLOAT16
  convolution_param { num_output: 3 kernel_size: 3 weight_filler { type: "gaussian" std: 0.1 }
    %s }
  mem_param { optimize: true pool: [1, 2] }
}
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" %s }
"""


def test_hints_pass_with_one_info_line(tmp_path, caplog):
    path = tmp_path / "hints.prototxt"
    path.write_text(NET % ("", "cache: true"))
    with caplog.at_level(logging.INFO, logger="caffepy.proto.io"):
        net = Net(str(path), phase=1)
    assert net.blobs["conv1"].shape == (1, 3, 3, 3)
    lines = [r for r in caplog.records if r.name == "caffepy.proto.io"]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    for name in ("mem_param", "cache", "forward_type", "default_forward_type"):
        assert name in lines[0].getMessage()


def test_unknown_field_is_an_error_by_default(tmp_path):
    path = tmp_path / "bad.prototxt"
    path.write_text(NET % ("dilation_mode: 2", "negative_slope_learnable: true"))
    with pytest.raises(ProtoError) as e:
        Net(str(path), phase=1)
    assert str(e.value) == ('%s:7:5: no field named "dilation_mode" in ConvolutionParameter '
                            "(layer 'conv1')" % path)


def test_lenient_net_names_every_ignored_field(tmp_path, caplog):
    path = tmp_path / "bad.prototxt"
    path.write_text(NET % ("dilation_mode: 2", "negative_slope_learnable: true"))
    with caplog.at_level(logging.INFO, logger="caffepy.proto.io"):
        net = Net(str(path), phase=1, strict=False)
    x = np.ones((1, 2, 5, 5), np.float32)
    net.blobs["data"].data[...] = x
    assert net.forward()["conv1"].shape == (1, 3, 3, 3)
    warn = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warn) == 1
    assert "ConvolutionParameter.dilation_mode (layer 'conv1')" in warn[0]
    assert "LayerParameter.negative_slope_learnable (layer 'relu1')" in warn[0]
    with unknown_fields.lenient():                 # the CLI's context gives the same result
        assert len(io.read_net(str(path)).layer) == 3


def test_blanking_keeps_lines_and_nested_blocks():
    text = 'name: "n"\nfoo { a: 1 b { c: [1, 2] } }\nlayer { name: "x" bar: "s" "t" }\n'
    unknown = unknown_fields.find_unknown(text, io.caffe_pb2.NetParameter.DESCRIPTOR)
    assert [(u.name, u.line, u.layer and u.layer[0]) for u in unknown] == [
        ("foo", 2, None), ("bar", 3, "x")]
    cleaned = unknown_fields.blank(text, unknown)
    assert cleaned.count("\n") == text.count("\n") and "foo" not in cleaned and "bar" not in cleaned


def test_cli_flag(tmp_path, capsys):
    path = tmp_path / "bad.prototxt"
    path.write_text(NET % ("dilation_mode: 2", ""))
    assert cli_main(["summary", "--strict", str(path)]) == 1
    assert 'no field named "dilation_mode"' in capsys.readouterr().err
    assert cli_main(["summary", str(path)]) == 0       # structure only: dropped with a WARNING
    out, err = capsys.readouterr()
    assert "conv1" in out and "ConvolutionParameter.dilation_mode" in err
    assert "summary only reads the structure; --strict makes it an error" in err
    assert cli_main(["summary", "--ignore-unknown-fields", str(path)]) == 0
    assert "conv1" in capsys.readouterr().out
    assert cli_main(["time", "--model", str(path), "--iterations", "1"]) == 1   # computes: strict
    assert 'no field named "dilation_mode"' in capsys.readouterr().err


def test_exponent_numbers_scan_as_one_token():
    """``eps: 1e-09`` (channel-pruning's ResNet) is one number to the scanner, so an unknown field
    elsewhere in the file is reported, not a bogus field named "-09"."""
    text = ('layer { name: "bn" type: "BatchNorm" batch_norm_param { eps: 1e-09 } '
            'moving: 2.5E+3 foo: 1 }\n')
    unknown = unknown_fields.find_unknown(text, io.caffe_pb2.NetParameter.DESCRIPTOR)
    assert [u.name for u in unknown] == ["moving", "foo"]
    with unknown_fields.lenient():
        net = io.parse_text(text, io.caffe_pb2.NetParameter())
    assert net.layer[0].batch_norm_param.eps == pytest.approx(1e-9)
