"""A field caffepy's schema lacks: the error line names the repository's own caffe.proto when it
declares the field (caffepy.proto.own_schema), so the user knows what to give --proto."""
import os

import pytest

from caffepy.errors import ProtoError
from caffepy.proto import io, own_schema

SCHEMA = '''syntax = "proto2";
package caffe;
// optional int32 commented_out = 9;
message ConvolutionParameter {
  optional uint32 num_output = 1;
  optional uint32 number_gauss = 60 [default = 2];  /* a fork's field */
  message Inner { optional int32 inner_only = 1; }
  oneof pick { int32 picked = 70; }
}
message LayerParameter { optional ConvolutionParameter convolution_param = 106; }
'''
NET = ('layer { name: "c" type: "Convolution" bottom: "x" top: "c"\n'
       '  convolution_param { num_output: 2 number_gauss: 3 } }\n')


def test_declares_reads_fields_by_message():
    assert own_schema.declares(SCHEMA, "number_gauss", "ConvolutionParameter")
    assert own_schema.declares(SCHEMA, "picked", "ConvolutionParameter")      # a oneof's field
    assert not own_schema.declares(SCHEMA, "inner_only", "ConvolutionParameter")  # nested's
    assert own_schema.declares(SCHEMA, "inner_only", "Inner")
    assert not own_schema.declares(SCHEMA, "number_gauss", "LayerParameter")
    assert not own_schema.declares(SCHEMA, "commented_out")
    assert own_schema.declares(SCHEMA, "num_output")


def _repo(tmp_path, schema_at=("src", "caffe", "proto")):
    folder = tmp_path.joinpath(*schema_at)
    folder.mkdir(parents=True)
    (folder / "caffe.proto").write_text(SCHEMA)
    net = tmp_path / "models" / "gauss" / "train.prototxt"
    net.parent.mkdir(parents=True)
    net.write_text(NET)
    return str(net), str(folder / "caffe.proto")


def test_the_error_line_names_the_repositorys_schema(tmp_path, monkeypatch):
    net, schema = _repo(tmp_path)
    monkeypatch.chdir(str(tmp_path))
    with pytest.raises(ProtoError) as e:
        io.read_net(net)
    msg = str(e.value)
    rel = os.path.join("src", "caffe", "proto", "caffe.proto")
    assert msg == ('%s:2:37: no field named "number_gauss" in ConvolutionParameter (layer \'c\'); '
                   "the repository's own schema %s declares it: --proto %s" % (net, rel, rel))
    assert own_schema.declaring_schema(net, "number_gauss", "ConvolutionParameter") == schema


def test_no_hint_where_no_schema_declares_the_field(tmp_path):
    net, _ = _repo(tmp_path, ("proto",))
    with open(net, "w") as f:
        f.write(NET.replace("number_gauss", "not_declared"))
    with pytest.raises(ProtoError) as e:
        io.read_net(net)
    assert str(e.value).endswith("(layer 'c')")
    assert own_schema.hint("<string>", "number_gauss") == ""
    assert own_schema.declaring_schema(net, "not_declared") is None
    assert own_schema.declaring_schema(net, "number_gauss").endswith(
        os.path.join("proto", "caffe.proto"))                  # <repo>/proto/caffe.proto
