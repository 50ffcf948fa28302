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


def test_a_summary_showing_layers_after_an_unknown_type_as_unknown_counts_as_that_type():
    unbuilt = _tool()._unbuilt
    assert unbuilt("W... layer 'odd' (type NoSuchLayerType): no class and no shape rule — a "
                   "plug-in must supply it: ...; shown as '?' with the 2 layer(s) that depend on "
                   "its tops: a, b") == ("layer 'odd': unknown layer type 'NoSuchLayerType' "
                                         "(summary: shown as '?' with 2 layer(s) after it)")
    assert unbuilt("layer 'a' (type Odd and 1 more of this type: b): no class and no shape rule"
                   " — ...; shown as '?' with the 1 layer(s) that depend on its tops: c").startswith(
        "layer 'a': unknown layer type 'Odd'")
    assert unbuilt("layer 'a' (type Odd): no class and no shape rule — ...; shown as '?' with no "
                   "layer depending on its tops") is None          # the end of a net: as before
    assert unbuilt("") is None


def test_a_fork_field_caffepy_does_not_compute_is_its_own_category():
    tool = _tool()
    line = ("net.prototxt:41: layer 'conv1_1': field 'deletetop' of LayerParameter is known only "
            "from forks (a/b): caffepy does not compute it; use --ignore-unknown-fields ...")
    assert tool.category(1, "caffepy summary: error: " + line) == "fork_field"
    assert tool.category(1, 'caffepy summary: error: n.prototxt:3:5: no field named "x" in '
                            'LayerParameter') == "no_field"
