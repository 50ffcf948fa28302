"""The harvest of fork schemas: tools/harvest_fork_schemas.py on two tiny forks, the merged schema
on real harvested fields, and caffepy.proto.harvest_policy (summary / strict / lenient / default)."""
import importlib.util
import json
import logging
import os
import sys

import pytest

from caffepy import cli
from caffepy.errors import ProtoError
from caffepy.proto import caffe_pb2, harvest_policy, io, unknown_fields
from tests.conftest import ROOT, shared_path

needs_protoc = pytest.mark.skipif(importlib.util.find_spec("grpc_tools") is None,
                                  reason="needs grpcio-tools")
SYNOPSYS = "foss-for-synopsys-dwc-arc-processors/synopsys-caffe"

FORK_A = """
syntax = "proto2";
package caffe;
message ConvolutionParameter {
  optional uint32 num_output = 1;
  optional uint32 zz_pad_x = 2 [default = 0];   // 2 is BVLC's bias_term: renumbered
  repeated float zz_scales = 77;
}
message PoolingParameter {
  enum PoolMethod { MAX = 0; AVE = 1; STOCHASTIC = 2; }
  optional PoolMethod pool = 1 [default = MAX];
}
message ZzForkParameter { optional int32 k = 1 [default = 3]; }
message LayerParameter { optional ZzForkParameter zz_fork_param = 777; }
"""
FORK_B = """
syntax = "proto2";
package caffe;
message ConvolutionParameter {
  optional float zz_scales = 77 [default = 1];
}
message PoolingParameter {
  enum PoolMethod { MAX = 0; AVE = 1; STOCHASTIC = 2; ZZ_POOL = 9; }
  optional PoolMethod pool = 1 [default = MAX];
}
message ZzForkParameter { optional int32 k = 1 [default = 3]; optional string tag = 2; }
"""


def _tool(name):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "tools", name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def harvested_fixture(tmp_path_factory):
    shared_path("caffe-schema", "caffe-schema.json")
    pytest.importorskip("grpc_tools")
    root = tmp_path_factory.mktemp("forks")
    (root / "protos").mkdir()
    (root / "layer_types").mkdir()
    (root / "protos" / "a__forka.proto").write_text(FORK_A)
    (root / "protos" / "b__forkb.proto").write_text(FORK_B)
    (root / "protos" / "c__broken.proto").write_text("message {")
    (root / "layer_types" / "a__forka.txt").write_text("Convolution\nZzFork\n")
    (root / "layer_types" / "b__forkb.txt").write_text("ZzFork\nZzOther\n")
    with open(root / "sources.jsonl", "w") as f:
        for file, repo in (("a__forka", "a/forka"), ("b__forkb", "b/forkb"), ("c__broken", "c/broken")):
            f.write(json.dumps({"file": file + ".proto", "repo": repo, "commit": "0" * 40,
                                "path": "src/caffe/proto/caffe.proto"}) + "\n")
    tool = _tool("harvest_fork_schemas")
    outs = []
    for n in (1, 2):
        out = root / ("harvest%d.json" % n)
        tool.main([str(root / "protos"), "--out", str(out), "--jobs", "1"])
        outs.append(out.read_bytes())
    return outs


def test_tool_lists_new_fields_variants_and_forks(harvested_fixture):
    h = json.loads(harvested_fixture[0])
    conv = h["fields"]["ConvolutionParameter"]
    assert conv["zz_pad_x"] == [{"number": 2, "label": "optional", "type": "uint32", "default": "0",
                                 "forks": ["a/forka"]}]
    assert {(v["label"], v["type"], v["forks"][0]) for v in conv["zz_scales"]} == {
        ("repeated", "float", "a/forka"), ("optional", "float", "b/forkb")}
    assert "num_output" not in conv                       # BVLC's: not harvested
    assert h["enum_values"]["PoolingParameter.PoolMethod"] == {
        "ZZ_POOL": [{"number": 9, "forks": ["b/forkb"]}]}
    fork_msg = h["messages"]["ZzForkParameter"]
    assert fork_msg["forks"] == ["a/forka", "b/forkb"] and set(fork_msg["fields"]) == {"k", "tag"}
    assert h["fields"]["LayerParameter"]["zz_fork_param"][0]["type_name"] == "ZzForkParameter"
    assert list(h["failed"]) == ["c/broken"]
    assert h["stats"]["compiled"] == 2 and h["stats"]["forks_adding_something"] == 2
    assert h["layer_types"] == [{"type": "ZzFork", "forks": ["a/forka", "b/forkb"]},
                                {"type": "ZzOther", "forks": ["b/forkb"]}]


def test_tool_renumbers_clashes_and_is_deterministic(harvested_fixture):
    h = json.loads(harvested_fixture[0])
    assert h["renumbered"]["ConvolutionParameter.zz_pad_x"]["forks"] == {"2": ["a/forka"]}
    assert h["renumbered"]["ConvolutionParameter.zz_pad_x"]["caffepy"] >= 40000
    assert "ConvolutionParameter.zz_scales" not in h["renumbered"]     # 77 is free
    assert harvested_fixture[0] == harvested_fixture[1]


@needs_protoc
def test_fixture_merges_into_a_schema_that_compiles(harvested_fixture, tmp_path):
    gen, fsm = _tool("gen_caffe_proto"), _tool("fork_schema_model")
    with open(shared_path("caffe-schema", "caffe-schema.json")) as f:
        schema = json.load(f)
    additions = gen.load_additions()
    decided = gen.plan_harvest(schema, additions, json.loads(harvested_fixture[0]))
    path = tmp_path / "caffe.proto"
    path.write_text(gen.render(schema, additions, decided))
    model = fsm.model_of_proto(str(path))
    conv = model["messages"]["ConvolutionParameter"]["fields"]
    assert conv["zz_scales"]["label"] == "repeated" and conv["zz_scales"]["number"] == 77
    assert conv["zz_pad_x"]["number"] >= 40000 and conv["bias_term"]["number"] == 2
    assert model["enums"]["PoolingParameter.PoolMethod"]["ZZ_POOL"] == 9
    assert set(model["messages"]["ZzForkParameter"]["fields"]) == {"k", "tag"}
    table = gen.harvested_table(decided)
    # repeated here, optional with a default in b/forkb: elements equal to it change nothing
    assert table["ConvolutionParameter.zz_scales"] == {"forks": ["a/forka", "b/forkb"], "count": 2,
                                                       "default": "1"}
    assert table["PoolingParameter.pool=ZZ_POOL"] == {"forks": ["b/forkb"], "count": 1}


NET = """name: "h"
layer { name: "data" type: "Input" top: "data"
        input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 4 kernel_size: 3 %s } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
        pooling_param { pool: %s kernel_size: 2 stride: 2 } }
"""


def _net(tmp_path, conv="pad_l: 1 pad_r: 0 pad_t: 1 pad_b: 0", pool="MAX", extra=""):
    path = tmp_path / "net.prototxt"
    path.write_text(NET % (conv, pool) + extra)
    return str(path)


def test_schema_parses_real_harvested_fields(tmp_path):
    roi = 'layer { name: "roi" type: "ROIAlign" bottom: "conv1" top: "roi" ' \
          'roi_align_param { pooled_h: 7 pooled_w: 7 spatial_scale: 0.0625 } }\n'
    with harvest_policy.structure_only():
        net = io.read_net(_net(tmp_path, pool="AVE_TF", extra=roi))
    conv = net.layer[1].convolution_param
    assert (conv.pad_l, conv.pad_r, conv.pad_t, conv.pad_b) == (1, 0, 1, 0)
    assert caffe_pb2.PoolingParameter.PoolMethod.Name(net.layer[2].pooling_param.pool) == "AVE_TF"
    assert net.layer[3].roi_align_param.pooled_h == 7


def test_summary_mode_one_warning_naming_fields_and_forks(tmp_path, capfd):
    assert cli.main(["summary", _net(tmp_path, pool="AVE_TF")]) == 0
    err = capfd.readouterr().err
    warnings = [ln for ln in err.splitlines() if "known only from Caffe forks" in ln]
    assert len(warnings) == 1, err
    assert "ConvolutionParameter.pad_l (layer 'conv1') [%s]" % SYNOPSYS in warnings[0]
    assert "PoolingParameter.pool=AVE_TF (layer 'pool1')" in warnings[0]
    assert "pad_r" not in warnings[0]                       # 0: its default


def test_draw_reads_structure(tmp_path, capfd):
    out = tmp_path / "net.json"
    assert cli.main(["draw", _net(tmp_path), "--json", str(out)]) == 0
    assert out.exists()
    assert "ConvolutionParameter.pad_l" in capfd.readouterr().err


def test_strict_refuses_with_one_line_naming_field_and_forks(tmp_path):
    path = _net(tmp_path)
    with pytest.raises(ProtoError) as e:
        io.read_net(path)
    msg = str(e.value)
    assert msg == ("%s:5: layer 'conv1': field 'pad_l' of ConvolutionParameter is known only from "
                   "forks (%s): caffepy does not compute it; use --ignore-unknown-fields to build "
                   "without it, or --proto FORK/caffe.proto / a --layers plug-in "
                   "(1 more such field(s) in this file)" % (path, SYNOPSYS))
    assert "no field named" not in msg and "\n" not in msg


def test_strict_names_a_harvested_enum_value(tmp_path):
    with pytest.raises(ProtoError, match=r":7: layer 'pool1': value AVE_TF of field 'pool' of "
                                         r"PoolingParameter is known only from forks \(.*\): caffepy"):
        io.read_net(_net(tmp_path, conv="", pool="AVE_TF"))


@pytest.mark.parametrize("engine,computed", [("FFT", True), ("LIBDNN", True), ("MLU", True),
                                              ("XNOR_NN", False)])
def test_fork_engines_of_the_same_function_build_and_a_binarizing_one_does_not(engine, computed):
    """An engine value picks how the layer computes, not what: FFT, the OpenCL kernels and
    Cambricon's MLU build and give the CAFFE engine's output; XNOR_NN binarizes the convolution
    (mistler/xnor_nn), which caffepy does not compute."""
    import numpy as np
    from caffepy.net import Net
    text = ('name: "e" input: "x" input_shape { dim: 1 dim: 2 dim: 5 dim: 5 } layer { name: "c" '
            'type: "Convolution" bottom: "x" top: "y" convolution_param { num_output: 3 '
            'kernel_size: 3 %s weight_filler { type: "gaussian" } } }')
    if not computed:
        with pytest.raises(ProtoError, match="value %s of field 'engine' of ConvolutionParameter"
                                             " is known only from forks" % engine):
            Net(text % ("engine: " + engine), caffe_pb2.TEST)
        return
    fork, plain = Net(text % ("engine: " + engine), caffe_pb2.TEST), Net(text % "", caffe_pb2.TEST)
    plain.params["c"][0].data[...] = fork.params["c"][0].data
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(np.float32)
    np.testing.assert_array_equal(fork.forward(x=x)["y"], plain.forward(x=x)["y"])


def test_net_construction_is_strict(tmp_path):
    from caffepy.net import Net
    with pytest.raises(ProtoError, match="field 'pad_l' of ConvolutionParameter is known only"):
        Net(_net(tmp_path), caffe_pb2.TEST)


def test_lenient_warns(tmp_path, caplog):
    with unknown_fields.lenient(), caplog.at_level(logging.WARNING, logger="caffepy"):
        net = io.read_net(_net(tmp_path))
    assert net.layer[1].convolution_param.pad_l == 1
    lines = [r.getMessage() for r in caplog.records if "known only from Caffe forks" in r.getMessage()]
    assert len(lines) == 1 and "--ignore-unknown-fields" in lines[0] and SYNOPSYS in lines[0]


def test_default_valued_field_is_silently_fine(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="caffepy"):
        net = io.read_net(_net(tmp_path, conv="pad_l: 0 pad_type: 0"))
    assert net.layer[1].convolution_param.HasField("pad_l")
    assert not [r for r in caplog.records if "forks" in r.getMessage()]


def test_find_harvested_reports_path_layer_and_forks():
    net = caffe_pb2.NetParameter()
    layer = net.layer.add(name="c", type="Convolution")
    layer.convolution_param.pad_l = 2
    (rec,) = harvest_policy.find_harvested(net)
    assert (rec.path, rec.layer, rec.message, rec.field) == (
        "layer.convolution_param.pad_l", "c", "ConvolutionParameter", "pad_l")
    assert rec.entry["forks"] == [SYNOPSYS]


def test_summary_and_draw_strict_refuse_what_the_computing_commands_refuse(tmp_path, capfd):
    """--strict of the structure-only commands builds only what Net construction builds: a
    harvested field caffepy does not compute is the same one-line error there."""
    path = _net(tmp_path, pool="AVE_TF")
    for argv in (["summary", path, "--strict"], ["draw", path, "--strict", "--json",
                                                 str(tmp_path / "n.json")]):
        assert cli.main(argv) != 0
        err = capfd.readouterr().err
        assert "field 'pad_l' of ConvolutionParameter is known only from forks" in err, argv
        assert "Traceback" not in err
    assert not (tmp_path / "n.json").exists()
    assert cli.main(["summary", path]) == 0          # without --strict: the structure, one WARNING
    assert "known only from Caffe forks" in capfd.readouterr().err


def test_summary_strict_reads_a_replaced_data_layers_fork_fields_for_the_structure(tmp_path, capfd):
    """summary shows a data layer as an Input layer of its shape: the fork fields of a reader are
    not computed there by any command run, so --strict names them in the WARNING only; a fork
    field of a layer it builds is still refused."""
    data = ('layer { name: "data" type: "ImageData" top: "data" top: "label" '
            'image_data_param { source: "list.txt" batch_size: 2 new_height: 32 new_width: 32 '
            'max_rotate_angle: 10 } }\n')
    conv = ('layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1" '
            'convolution_param { num_output: 4 kernel_size: 3 } }\n')
    path = tmp_path / "net.prototxt"
    path.write_text(data + conv)
    assert "ImageDataParameter.max_rotate_angle" in harvest_policy.table()
    assert cli.main(["summary", str(path), "--strict"]) == 0
    assert "ImageDataParameter.max_rotate_angle (layer 'data')" in capfd.readouterr().err
    with pytest.raises(ProtoError):
        io.read_net(str(path))                      # building it to train refuses the field
    path.write_text(data + conv.replace("kernel_size: 3", "kernel_size: 3 pad_l: 1"))
    assert cli.main(["summary", str(path), "--strict"]) != 0
    assert "field 'pad_l' of ConvolutionParameter is known only from forks" in \
        capfd.readouterr().err


def test_summary_strict_reads_undeclared_fields_of_a_data_layer_for_the_structure(tmp_path, capfd):
    """A field no schema declares is read for the structure only when it sits in a layer summary
    shows as an Input layer: an ImageData reader's extra field, a fork reader whose parameter
    message nobody declares (the reader then counts as a data layer by that field), a V1 reader
    whose type the V1 enum lacks. The same field in a layer summary builds stays an error, and
    building the net to train refuses every one of them."""
    conv = ('layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1" '
            'convolution_param { num_output: 4 kernel_size: 3 } }\n')
    readers = [
        'layer { name: "data" type: "ImageData" top: "data" top: "label" image_data_param { '
        'source: "l.txt" batch_size: 2 new_height: 32 new_width: 32 label_dim: 5 } }\n',
        'layer { name: "data" type: "ImageMultiLabelReader" top: "data" top: "label" '
        'my_reader_data_param { source: "l.txt" batch: 2 } '
        'transform_param { crop_size: 32 } }\n',
    ]
    path = tmp_path / "net.prototxt"
    for data in readers:
        path.write_text(data + conv)
        assert cli.main(["summary", str(path), "--strict"]) == 0, data
        err = capfd.readouterr().err
        assert "no schema declares, in data layers shown as Input layers, read for the " \
               "structure only" in err and "(layer 'data')" in err
        with pytest.raises(ProtoError) as e:
            io.read_net(str(path))
        assert "no field named" in str(e.value)
    v1 = ('layers { name: "data" type: MY_FORK_DATA top: "data" top: "label" '
          'my_fork_data_param { source: "l.txt" } }\n'
          'layers { name: "conv1" type: CONVOLUTION bottom: "data" top: "conv1" '
          'convolution_param { num_output: 4 kernel_size: 3 } }\n')
    path.write_text(v1)
    assert cli.main(["summary", str(path), "--strict", "--input", "data=1,3,16,16"]) == 0
    assert "V1LayerParameter.my_fork_data_param (layer 'data')" in capfd.readouterr().err
    path.write_text(readers[0] + conv.replace("kernel_size: 3", "kernel_size: 3 kernel_q: 1"))
    assert cli.main(["summary", str(path), "--strict"]) != 0
    err = capfd.readouterr().err
    assert 'no field named "kernel_q" in ConvolutionParameter' in err and "Traceback" not in err


def test_a_repeated_fork_field_at_its_neutral_value_changes_nothing(tmp_path):
    """OpenCL Caffe's pooling ``dilation`` (repeated, no default: its source reads an empty field
    as 1): ``dilation: 1`` is plain pooling and builds strictly; ``dilation: 2`` is refused."""
    net = ('input: "x" input_shape { dim: 1 dim: 1 dim: 8 dim: 8 }\n'
           'layer { name: "pool" type: "Pooling" bottom: "x" top: "p" pooling_param { pool: MAX '
           'kernel_size: 2 stride: 2 dilation: %d dilation: %d } }\n')
    path = tmp_path / "net.prototxt"
    path.write_text(net % (1, 1))
    pool = [lp for lp in io.read_net(str(path)).layer if lp.name == "pool"][0]
    assert list(pool.pooling_param.dilation) == [1, 1]
    path.write_text(net % (1, 2))
    with pytest.raises(ProtoError) as e:
        io.read_net(str(path))
    assert "field 'dilation' of PoolingParameter is known only from forks" in str(e.value)
