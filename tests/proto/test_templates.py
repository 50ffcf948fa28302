"""Template placeholders: --define writes values in; lenient readings leave them unset, except
num_output, which takes the class count (caffepy.proto.templates)."""
import pytest

from caffepy import cli
from caffepy.errors import ProtoError
from caffepy.proto import io, templates

NET = """name: "seg_${EXP}"
input: "data"
input_shape { dim: 1 dim: 3 dim: $HEIGHT dim: {{ WIDTH }} }
layer { name: "fc8_${EXP}" type: "Convolution" bottom: "data" top: "fc8"
  convolution_param { num_output: ${NUM_LABELS} kernel_size: 3 } }
"""


def _write(tmp_path, text=NET):
    path = tmp_path / "net.prototxt"
    path.write_text(text)
    return str(path)


def test_defines_are_written_in_everywhere_before_a_strict_read(tmp_path):
    path = _write(tmp_path)
    with templates.defined(["EXP=voc", "HEIGHT=12", ("WIDTH", "16"), "NUM_LABELS=21"]):
        net = io.read_net(path)
    assert net.name == "seg_voc"
    assert list(net.layer[0].input_param.shape[0].dim) == [1, 3, 12, 16]
    conv = net.layer[-1]
    assert conv.name == "fc8_voc" and conv.convolution_param.num_output == 21
    with pytest.raises(ProtoError):                 # without the values: Caffe's parse error
        io.read_net(path)


def test_a_name_is_replaced_whole_and_only_where_it_is_a_placeholder():
    with templates.defined(["W=7"]):
        assert templates.substitute("a: $W b: $WIDTH c: ${W} d: { W } e:{W} f: \"x$W\"") == \
            "a: 7 b: $WIDTH c: 7 d: { W } e:7 f: \"x7\""


def test_summary_with_defines_builds_strictly(tmp_path, capfd):
    path = _write(tmp_path)
    argv = ["summary", path, "--strict", "--define", "EXP=voc", "--define", "HEIGHT=12",
            "--define", "WIDTH=16", "--define", "NUM_LABELS=21"]
    assert cli.main(argv) == 0
    rows = [line.split() for line in capfd.readouterr().out.splitlines()]
    assert ["input", "Input", "1x3x12x16"] == [r[:3] for r in rows if r[:1] == ["input"]][0]
    assert ["fc8_voc", "Convolution", "1x21x10x14"] in [r[:3] for r in rows]


def test_summary_without_defines_uses_the_class_count_for_num_output_only(tmp_path, capfd):
    path = _write(tmp_path, NET.replace("$HEIGHT", "12").replace("{{ WIDTH }}", "16"))
    assert cli.main(["summary", path, "--strict"]) != 0
    err = capfd.readouterr().err
    assert err.count("\n") <= 2 and "Traceback" not in err
    assert "a template placeholder: --define NUM_LABELS=VALUE gives its value" in err
    assert cli.main(["summary", path]) == 0
    err = capfd.readouterr().err
    assert "num_output: ${NUM_LABELS} (template placeholder: a stand-in class count of 10" in err
    assert cli.main(["summary", path, "--num-classes", "21"]) == 0
    captured = capfd.readouterr()
    assert "(template placeholder: the class count 21)" in captured.err
    assert ["fc8_${EXP}", "Convolution", "1x21x10x14"] in [
        line.split()[:3] for line in captured.out.splitlines()]


def test_a_malformed_define_is_a_usage_error(tmp_path, capfd):
    path = _write(tmp_path)
    with pytest.raises(SystemExit) as e:
        cli.main(["summary", path, "--define", "1X=3"])
    assert e.value.code == 2
    assert "--define expects NAME=VALUE" in capfd.readouterr().err
