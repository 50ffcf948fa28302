"""Hao-Tju/GLP4NN_Caffe's ConvolutionParameter.parallel_degree: a GPU scheduling hint that
leaves the convolution's result unchanged."""
import logging

import numpy as np

from caffepy import Net
from caffepy.proto import caffe_pb2
from caffepy.proto.io import read_net
from caffepy.proto.hint_fields import declared_hints

NET = """name: "glp4nn_tiny"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 3 dim: 2 dim: 6 dim: 6 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 stride: 1 %s
    weight_filler { type: "gaussian" std: 0.1 } bias_filler { type: "constant" value: 0.5 } } }
"""


def test_parallel_degree_parses_as_a_declared_hint():
    net = read_net(NET % "parallel_degree: 3")
    conv = net.layer[1].convolution_param
    assert conv.parallel_degree == 3
    assert caffe_pb2.ConvolutionParameter().parallel_degree == 1
    assert declared_hints(net) == ["parallel_degree"]


def test_parallel_degree_leaves_the_convolution_unchanged(caplog):
    x = np.random.default_rng(0).standard_normal((3, 2, 6, 6))
    outs = []
    with caplog.at_level(logging.INFO):
        for extra in ("", "parallel_degree: 4"):
            net = Net(NET % extra, phase=caffe_pb2.TEST)
            net.params["conv1"][0].data[...] = np.arange(4 * 2 * 9).reshape(4, 2, 3, 3) / 50.0
            net.blobs["data"].data[...] = x
            outs.append(net.forward()["conv1"].copy())
    np.testing.assert_array_equal(outs[0], outs[1])
    assert any("parallel_degree" in r.getMessage() for r in caplog.records)


def test_glp4nn_caffenet_excerpt_builds_strict(tmp_path, capsys):
    from caffepy.cli import main
    path = tmp_path / "train_val_3.prototxt"
    path.write_text(NET % "parallel_degree: 3")
    assert main(["summary", "--strict", str(path)]) in (0, None)
    assert "conv1" in capsys.readouterr().out
