"""tools/zoo_survey.py on three tiny nets: one that builds, one with an unknown layer type, one
with an unknown field; and its --tally tables."""
import importlib.util
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

INPUT = 'name: "t"\ninput: "data"\ninput_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
GOOD = INPUT + '''layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
'''
UNKNOWN_TYPE = INPUT + ('layer { name: "odd" type: "NoSuchLayerType" bottom: "data" top: "odd" }\n'
                        'layer { name: "relu" type: "ReLU" bottom: "odd" top: "relu" }\n')
UNKNOWN_FIELD = INPUT + '''layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 no_such_field: 2 } }
'''
SOLVER = 'net: "train.prototxt"\nbase_lr: 0.01\nmax_iter: 10\n'


def _tool():
    spec = importlib.util.spec_from_file_location("zoo_survey",
                                                  os.path.join(ROOT, "tools", "zoo_survey.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["zoo_survey"] = mod          # its worker pool finds measure() by module name
    spec.loader.exec_module(mod)
    return mod


def test_zoo_survey_categories(tmp_path, capsys):
    tool = _tool()
    nets = tmp_path / "nets" / "someone__nets"
    nets.mkdir(parents=True)
    for name, text in [("good.prototxt", GOOD), ("unknown_type.prototxt", UNKNOWN_TYPE),
                       ("unknown_field.prototxt", UNKNOWN_FIELD), ("solver.prototxt", SOLVER)]:
        (nets / name).write_text(text)
    out = tmp_path / "survey.json"
    assert tool.main([str(tmp_path / "nets"), "-o", str(out), "-j", "2", "--quiet"]) == 0
    data = json.loads(out.read_text())
    recs = {os.path.basename(r["path"]): r for r in data["files"]}
    assert sorted(recs) == ["good.prototxt", "unknown_field.prototxt", "unknown_type.prototxt"]
    assert [os.path.basename(r["path"]) for r in data["skipped"]] == ["solver.prototxt"]
    assert all(r["repo"] == "someone/nets" and r["deploy_with_inputs"] for r in recs.values())

    good = recs["good.prototxt"]
    assert good["ok"] and good["ok_lenient"] and good["category"] is None
    bad_type = recs["unknown_type.prototxt"]
    assert not bad_type["ok"] and not bad_type["ok_lenient"]
    assert bad_type["category"] == "unknown_type" and "NoSuchLayerType" in bad_type["error"]
    field = recs["unknown_field.prototxt"]   # summary reads structure: dropped with a WARNING
    assert field["ok"] and field["ok_lenient"] and field["category"] is None

    capsys.readouterr()
    assert tool.main(["--tally", str(out)]) == 0
    text = capsys.readouterr().out
    assert "build, all files:                 2 / 3 (66.7%)" in text
    assert "NoSuchLayerType" in text


def test_a_summary_listing_a_layer_without_class_counts_as_its_unknown_type():
    unbuilt = _tool()._unbuilt
    assert unbuilt("table\n", "W... layer 'odd' (type NoSuchLayerType): no class and no shape "
                   "rule — a plug-in must supply it: ...") == (
        "layer 'odd': unknown layer type 'NoSuchLayerType' (summary: shown as '?')")
    assert unbuilt("table\n~ shape carried: FancyLoss (loss, l2): a loss: a scalar top\n", "") == (
        "layer 'loss': unknown layer type 'FancyLoss' (summary: shape carried by a rule)")
    assert unbuilt("", "layer 'a' (type Odd and 1 more of this type: b): no class and no shape "
                   "rule") == "layer 'a': unknown layer type 'Odd' (summary: shown as '?')"
    assert unbuilt("table\n", "") is None
