import json
import os
import subprocess
import sys

import pytest

from caffepy.draw import (annotate_partition, net_json, read_net_json, select_phase,
                          write_net_json)
from caffepy.draw.netjson import layer_family, validate
from caffepy.errors import CaffeError
from tests.conftest import shared_path

SMALL = """
name: "small"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }
layer { name: "c" type: "Convolution" bottom: "x" top: "c"
        convolution_param { num_output: 5 kernel_size: 3 pad: 1 } }
layer { name: "r" type: "ReLU" bottom: "c" top: "c" }
layer { name: "fc" type: "InnerProduct" bottom: "c" top: "fc" inner_product_param { num_output: 7 }
        param { name: "w" lr_mult: 2 } }
layer { name: "fc2" type: "InnerProduct" bottom: "c" top: "fc2" inner_product_param { num_output: 7 }
        include { phase: TEST } }
"""


def _nodes(doc, kind):
    return {n["name"]: n for n in doc["nodes"] if n["kind"] == kind}


def test_schema_and_links():
    doc = net_json(SMALL)
    assert (doc["schema"], doc["version"], doc["name"], doc["phase"]) == ("caffepy.netjson", 1, "small", "ALL")
    layers, blobs = _nodes(doc, "layer"), _nodes(doc, "blob")
    assert list(layers) == ["in", "c", "r", "fc", "fc2"]
    assert set(blobs) == {"x", "c", "fc", "fc2"}
    ids = {n["id"] for n in doc["nodes"]}
    assert len(ids) == len(doc["nodes"])
    assert all(lk["source"] in ids and lk["target"] in ids for lk in doc["links"])
    assert layers["r"]["in_place"] and not layers["c"]["in_place"]
    assert layers["c"]["family"] == "convolution" and layers["r"]["family"] == "neuron"
    assert layers["c"]["attrs"] == {"num_output": 5, "kernel": [3], "stride": [1], "pad": [1]}
    assert layers["fc2"]["phase"] == "TEST" and layers["fc"]["phase"] == "ALL"
    assert blobs["x"]["shape"] == [2, 3, 4, 4]            # stated by the Input layer
    assert layers["fc"]["params"][0]["name"] == "w" and layers["fc"]["params"][0]["lr_mult"] == 2
    assert layers["fc"]["param_count"] is None            # no Net: parameter shapes unknown
    validate(json.loads(json.dumps(doc)))


def test_phase_filter():
    assert "fc2" not in _nodes(net_json(SMALL, phase="TRAIN"), "layer")
    assert "fc2" in _nodes(net_json(SMALL, phase="TEST"), "layer")
    doc = select_phase(net_json(SMALL), "TRAIN")
    assert "fc2" not in _nodes(doc, "layer") and "fc2" not in _nodes(doc, "blob")
    with pytest.raises(CaffeError):
        net_json(SMALL, phase="VAL")


def test_shapes_from_built_net():
    net_mod = pytest.importorskip("caffepy.net")
    from caffepy.proto import caffe_pb2
    net = net_mod.Net(SMALL, caffe_pb2.TEST)
    doc = net_json(net)
    layers, blobs = _nodes(doc, "layer"), _nodes(doc, "blob")
    assert not any(n["type"] == "Split" for n in layers.values())     # auto splits are hidden
    assert blobs["c"]["shape"] == [2, 5, 4, 4] and blobs["fc"]["shape"] == [2, 7]
    assert layers["c"]["params"][0]["shape"] == [5, 3, 3, 3]
    assert layers["c"]["param_count"] == 5 * 27 + 5
    assert layers["fc"]["param_count"] == 7 * 80 + 7
    assert layers["r"]["param_count"] == 0
    assert {lk["blob"] for lk in doc["links"] if lk["target"] == "layer:fc"} == {"c"}
    assert all(lk["shape"] is not None for lk in doc["links"])


def test_legacy_input_fields():
    doc = net_json('name: "n" input: "data" input_dim: 1 input_dim: 3 input_dim: 8 input_dim: 8 '
                   'layer { name: "r" type: "ReLU" bottom: "data" top: "r" }')
    assert _nodes(doc, "blob")["data"]["shape"] == [1, 3, 8, 8]


def test_write_read_round_trip(tmp_path):
    path = tmp_path / "visualization" / "net.json"
    doc = write_net_json(SMALL, path)
    assert read_net_json(path) == json.loads(json.dumps(doc))
    assert os.listdir(path.parent) == ["net.json"]                    # no temp files left


@pytest.mark.parametrize("bad, what", [
    ({"schema": "other", "version": 1}, "schema"),
    ({"schema": "caffepy.netjson", "version": 99}, "version 99"),
    ({"schema": "caffepy.netjson", "version": 1, "nodes": [{"id": "a", "kind": "layer", "name": "a"}],
      "links": [{"source": "a", "target": "nope"}]}, "nope"),
])
def test_validate_errors(tmp_path, bad, what):
    p = tmp_path / "n.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(CaffeError, match=what) as e:
        read_net_json(p)
    assert "\n" not in str(e.value)


def test_read_errors_are_one_line(tmp_path):
    p = tmp_path / "n.json"
    p.write_text("{not json")
    with pytest.raises(CaffeError, match="not valid JSON"):
        read_net_json(p)
    with pytest.raises(CaffeError, match="cannot read"):
        read_net_json(tmp_path / "missing.json")


def test_annotate_partition():
    doc = net_json(SMALL)
    left = annotate_partition(doc, {"c": {"worker_group": 0, "worker": 1},
                                    "fc": {"worker_group": 1, "worker": 0},
                                    "w": {"server_shard": 3}, "ghost": {"worker": 0}})
    assert left == ["ghost"]
    layers, blobs = _nodes(doc, "layer"), _nodes(doc, "blob")
    assert (layers["c"]["worker_group"], layers["c"]["worker"]) == (0, 1)
    assert layers["fc"]["params"][0]["server_shard"] == 3
    assert blobs["fc"]["worker_group"] == 1
    assert "worker_group" not in layers["r"]
    with pytest.raises(CaffeError, match="unknown field"):
        annotate_partition(doc, {"c": {"gpu": 1}})
    with pytest.raises(CaffeError, match="non-negative int"):
        annotate_partition(doc, {"c": {"worker": -1}})


def test_write_with_placement(tmp_path):
    doc = write_net_json(SMALL, tmp_path / "n.json", placement={"c": {"worker_group": 2}})
    assert _nodes(read_net_json(tmp_path / "n.json"), "layer")["c"]["worker_group"] == 2
    assert _nodes(doc, "layer")["c"]["worker_group"] == 2


def test_families():
    assert layer_family("Pooling") == "pooling" and layer_family("BatchNorm") == "normalization"
    assert layer_family("FancyLoss") == "loss" and layer_family("Concat") == "other"
    assert layer_family("Data") == "data" and layer_family("InnerProduct") == "inner_product"


def test_no_graphviz_import_on_json_path():
    code = ("import sys, caffepy.draw, caffepy.commands.draw as c; "
            "caffepy.draw.net_json(%r); caffepy.draw.get_dot(%r); "
            "bad = [m for m in ('graphviz', 'pygraphviz') if m in sys.modules]; "
            "sys.exit(1 if bad else 0)" % (SMALL, SMALL))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0


def test_lenet_from_shared():
    doc = net_json(shared_path("modelzoo", "bvlc", "examples", "mnist", "lenet_train_test.prototxt"))
    data_layers = [n for n in doc["nodes"] if n["kind"] == "layer" and n["type"] == "Data"]
    assert sorted(n["phase"] for n in data_layers) == ["TEST", "TRAIN"]
    assert len({n["id"] for n in data_layers}) == 2                   # same name, distinct ids
    assert sorted(n["attrs"]["batch_size"] for n in data_layers) == [64, 100]


def test_draw_shapes_of_a_net_whose_data_is_missing(tmp_path, capfd):
    # a train_val net whose LMDB and mean file are not on this machine: the shapes summary
    # shows, the file's own layers drawn, one WARNING; a net summary cannot build stays an error
    from caffepy.cli import main
    net = tmp_path / "train_val.prototxt"
    net.write_text(
        'layer { name: "data" type: "Data" top: "data" top: "label" transform_param { '
        'crop_size: 28 mean_file: "/nowhere/mean.binaryproto" } data_param { '
        'source: "/nowhere/lmdb" batch_size: 4 backend: LMDB } }\n'
        'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" '
        'inner_product_param { num_output: 5 } }\n'
        'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }\n')
    doc = tmp_path / "net.json"
    assert main(["draw", str(net), "--shapes", "--json", str(doc)]) == 0
    err = capfd.readouterr().err
    assert "shapes as caffepy summary shows them" in err and "mean.binaryproto" in err
    nodes = {n["id"]: n for n in json.loads(doc.read_text())["nodes"]}
    assert nodes["layer:data"]["type"] == "Data"
    assert nodes["blob:ip"]["shape"] == [4, 5]
    assert nodes["blob:data"]["shape"][0] == 4 and nodes["blob:data"]["shape"][2:] == [28, 28]
    assert [p["shape"] for p in nodes["layer:ip"]["params"]][1] == [5]
    net.write_text(net.read_text().replace('bottom: "data" top: "ip"',
                                           'bottom: "nothing" top: "ip"'))
    assert main(["draw", str(net), "--shapes", "--json", str(doc)]) != 0
    err = capfd.readouterr().err
    assert "unknown bottom blob 'nothing'" in err and "Traceback" not in err
