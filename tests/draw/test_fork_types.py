"""draw reads the structure of any file some fork's schema parses: V1 layer types the V1 enum
lacks and V0 types Caffe does not know become nodes of that type name, fork enum values and
fields are dropped or accepted with a WARNING (``--strict``: unknown ones are errors), and the
commands that compute keep refusing them."""
import json

import pytest

from caffepy.cli import main
from caffepy.draw import net_json
from caffepy.errors import CaffeError
from caffepy.proto import io as proto_io
from caffepy.proto.harvest_policy import structure_only

V1 = '''name: "v1"
input: "data"
input_dim: 1 input_dim: 3 input_dim: 32 input_dim: 32
layers { name: "conv" type: CONVOLUTION bottom: "data" top: "conv" convolution_param { num_output: 8 kernel_size: 3 } }
layers { name: "sel" type: NO_SUCH_FORK_TYPE bottom: "conv" top: "sel" }
layers { type: 987 bottom: "sel" top: "num" }
layers { name: "relu" type: RELU bottom: "num" top: "num" }
layers { name: "dw" type: DEPTH_WISE_CONVOLUTION bottom: "num" top: "dw" convolution_param { num_output: 8 kernel_size: 3 group: 8 } }
'''

V0 = '''name: "v0"
input: "data"
input_dim: 1 input_dim: 3 input_dim: 32 input_dim: 32
input: "label"
input_dim: 1 input_dim: 1 input_dim: 1 input_dim: 1
layers { layer { name: "fc" type: "innerproduct" num_output: 10 } bottom: "data" top: "fc" }
layers { layer { name: "loss" type: "squaredhingeloss" } bottom: "fc" bottom: "label" top: "loss" }
'''

ENUM = '''name: "e"
input: "data"
input_shape { dim: 1 dim: 3 dim: 32 dim: 32 }
layer { name: "pool" type: "Pooling" bottom: "data" top: "pool" pooling_param { pool: WEIRDPOOL kernel_size: 2 stride: 2 } }
layer { name: "x" type: "Foo" bottom: "pool" top: "x" foo_param { a: 1 } }
layer { name: "p2" type: "Pooling" bottom: "x" top: "p2" pooling_param { pool: MAX kernel_size: 2 kstride: 2 } }
'''


def _types(doc):
    return [(n["name"], n["type"]) for n in doc["nodes"] if n["kind"] == "layer"]


def _draw(tmp_path, text, *flags):
    path = tmp_path / "net.prototxt"
    path.write_text(text)
    out = tmp_path / "net.json"
    rc = main(["draw", str(path), "--json", str(out), "-o", str(tmp_path / "net.dot")] +
              list(flags))
    return rc, (json.loads(out.read_text()) if rc == 0 else None)


def test_v1_types_the_enum_lacks_are_nodes_of_their_name(tmp_path, capsys):
    for flags in ((), ("--strict",)):            # a layer type is structure: strict too
        rc, doc = _draw(tmp_path, V1, *flags)
        assert rc == 0
        assert _types(doc) == [("input", "Input"), ("conv", "Convolution"),
                               ("sel", "NO_SUCH_FORK_TYPE"), ("", "987"), ("relu", "ReLU"),
                               ("dw", "DepthwiseConvolution")]     # a fork's V1 type, mapped
        assert "NO_SUCH_FORK_TYPE" in (tmp_path / "net.dot").read_text()
        err = capsys.readouterr().err
        assert "kept as their names for the structure" in err and "NO_SUCH_FORK_TYPE" in err


def test_v0_types_caffe_does_not_know_are_nodes_of_their_name(tmp_path, capsys):
    rc, doc = _draw(tmp_path, V0)
    assert rc == 0
    assert _types(doc) == [("input", "Input"), ("fc", "InnerProduct"),
                           ("loss", "squaredhingeloss")]
    assert 'V0 type "squaredhingeloss" is not one Caffe knows' in capsys.readouterr().err


def test_fork_enum_values_and_fields_are_dropped_unless_strict(tmp_path, capsys):
    rc, doc = _draw(tmp_path, ENUM)
    assert rc == 0 and _types(doc) == [("input", "Input"), ("pool", "Pooling"), ("x", "Foo"),
                                       ("p2", "Pooling")]
    err = capsys.readouterr().err
    assert "PoolingParameter.pool (layer 'pool') = WEIRDPOOL" in err     # unknown: dropped
    assert "LayerParameter.foo_param (layer 'x')" in err
    assert "PoolingParameter.kstride (layer 'p2')" in err               # a fork's (harvested)
    assert _draw(tmp_path, ENUM, "--strict")[0] == 1
    err = capsys.readouterr().err
    assert "no value named WEIRDPOOL" in err and "\n" not in err.strip()


def test_commands_that_compute_still_refuse_them():
    with pytest.raises(CaffeError, match="no value named NO_SUCH_FORK_TYPE"):
        proto_io.read_net(V1)
    with pytest.raises(CaffeError, match='unknown V0 layer type "squaredhingeloss"'):
        proto_io.read_net(V0)
    with structure_only():
        assert [lp.type for lp in proto_io.read_net(V0).layer][-1] == "squaredhingeloss"
        doc = net_json(proto_io.read_net(V1))
    assert ("sel", "NO_SUCH_FORK_TYPE") in _types(doc)


def test_summary_of_the_same_files(tmp_path, capsys):
    """summary shows the kept types: a V0 loss carried as a scalar, a V1 type without a rule
    as '?' with the layers depending on it (the harvested depthwise V1 type too, mapped to its
    fork's type string: its bottom's shape is unknown)."""
    for text, want in ((V0, [("loss", "squaredhingeloss~", "scalar")]),
                       (V1, [("sel", "NO_SUCH_FORK_TYPE", "?"), ("relu", "ReLU", "?"),
                             ("dw", "DepthwiseConvolution", "?")])):
        path = tmp_path / "net.prototxt"
        path.write_text(text)
        assert main(["summary", str(path)]) == 0
        out = capsys.readouterr().out.splitlines()
        rows = [tuple(ln.split()[:3]) for ln in out if ln.split()[:1] in ([w[0]] for w in want)]
        assert rows == want


def test_a_binary_v1_net_with_a_type_number_the_enum_lacks(tmp_path):
    """A .caffemodel of a V1 fork: the type number rides as an unknown field; draw keeps it as
    the layer's type, the commands that compute refuse it."""
    from google.protobuf.internal import encoder
    from caffepy.proto import caffe_pb2
    V1Layer = caffe_pb2.V1LayerParameter
    net = caffe_pb2.NetParameter(name="b", input=["data"], input_dim=[1, 3, 8, 8])
    net.layers.add(name="conv", type=V1Layer.CONVOLUTION, bottom=["data"], top=["conv"])
    odd = V1Layer(name="odd", bottom=["conv"], top=["odd"]).SerializeToString() + \
        encoder._VarintBytes(V1Layer.DESCRIPTOR.fields_by_name["type"].number << 3) + \
        encoder._VarintBytes(999)
    field = caffe_pb2.NetParameter.DESCRIPTOR.fields_by_name["layers"].number
    blob = net.SerializeToString() + encoder._VarintBytes(field << 3 | 2) + \
        encoder._VarintBytes(len(odd)) + odd
    with pytest.raises(CaffeError, match="no value numbered 999"):
        proto_io.read_net(blob)
    path = tmp_path / "v1.caffemodel"
    path.write_bytes(blob)
    out = tmp_path / "v1.json"
    assert main(["draw", str(path), "--json", str(out)]) == 0
    assert _types(json.loads(out.read_text()))[-1] == ("odd", "999")
