"""summary past layers caffepy cannot build: shapes carried by a rule (caffepy.zoo.shape_rules),
or '?' for the layer and everything depending on it, with one line naming what a plug-in must
supply; --strict fails on them instead."""
import argparse

import pytest

from caffepy.commands import summary as cmd
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.zoo.shape_rules import SAME_SHAPE, STAND_IN_SAME, carriers, rule_for
from caffepy.zoo.summary import format_summary, summarize

HEAD = '''name: "u"
input: "data"
input_shape { dim: 1 dim: 3 dim: 32 dim: 32 }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 8 kernel_size: 3 } }
'''
TAIL = '''layer { name: "pool" type: "Pooling" bottom: "act" top: "pool" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc" inner_product_param { num_output: 10 } }
'''
UNKNOWN_MIDDLE = HEAD + 'layer { name: "act" type: "SeLuFoo" bottom: "conv" top: "act" }\n' + TAIL


def _layer(text):
    net = caffe_pb2.NetParameter()
    from google.protobuf import text_format
    text_format.Parse(text, net)
    return net.layer[0]


def _shapes(rows):
    return [(r.name, r.type, r.top_shapes, r.carried is not None) for r in rows]


def _run(tmp_path, capsys, text, *flags):
    path = tmp_path / "net.prototxt"
    path.write_text(text)
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    rc = cmd.run(parser.parse_args([str(path)] + list(flags)))
    return rc, capsys.readouterr()


def test_unknown_type_in_the_middle_is_unknown_with_everything_after_it(tmp_path):
    notes = []
    rows, total = summarize(UNKNOWN_MIDDLE, notes=notes)
    assert _shapes(rows)[1:] == [("conv", "Convolution", [(1, 8, 30, 30)], False),
                                 ("act", "SeLuFoo", ["?"], False),
                                 ("pool", "Pooling", ["?"], False),
                                 ("fc", "InnerProduct", ["?"], False)]
    assert notes == ["layer 'act' (type SeLuFoo): no class and no shape rule — a plug-in must "
                     "supply it: @caffepy.register_layer(\"SeLuFoo\") loaded with --layers MODULE; "
                     "shown as '?' with the 2 layer(s) that depend on its tops: pool, fc"]
    assert total.params == 8 * 27 + 8


def test_the_command_exits_0_and_strict_fails_naming_the_layer(tmp_path, capsys):
    rc, out = _run(tmp_path, capsys, UNKNOWN_MIDDLE)
    assert rc == 0
    assert [ln.split()[:3] for ln in out.out.splitlines()[4:7]] == [
        ["act", "SeLuFoo", "?"], ["pool", "Pooling", "?"], ["fc", "InnerProduct", "?"]]
    plugin = [ln for ln in out.err.splitlines() if "a plug-in must supply it" in ln]
    assert len(plugin) == 1 and '@caffepy.register_layer("SeLuFoo") loaded with --layers MODULE' \
        in plugin[0] and "Traceback" not in out.err
    with pytest.raises(CaffeError, match=r"net.prototxt:5: layer 'act': unknown layer type "
                                         r"'SeLuFoo'"):
        _run(tmp_path, capsys, UNKNOWN_MIDDLE, "--strict")


def test_an_in_place_unknown_layer_carries_its_bottoms_shape(tmp_path, capsys):
    text = HEAD + 'layer { name: "act" type: "SeLuFoo" bottom: "conv" top: "conv" }\n' + \
        TAIL.replace('bottom: "act"', 'bottom: "conv"')
    rows, _ = summarize(text)
    assert _shapes(rows)[2:] == [("act", "SeLuFoo", [(1, 8, 30, 30)], True),
                                 ("pool", "Pooling", [(1, 8, 15, 15)], False),
                                 ("fc", "InnerProduct", [(1, 10)], False)]
    assert rows[2].carried == "in place: same shape as its bottom"
    rc, out = _run(tmp_path, capsys, text)
    lines = out.out.splitlines()
    assert rc == 0 and lines[4].split()[:3] == ["act", "SeLuFoo~", "1x8x30x30"]
    assert lines[-1] == "~ shape carried: SeLuFoo (act): in place: same shape as its bottom"
    with pytest.raises(CaffeError, match="unknown layer type 'SeLuFoo'"):
        _run(tmp_path, capsys, text, "--strict")


def test_fork_table_loss_and_conv_like_rules():
    text = HEAD + '''layer { name: "gn" type: "GroupNorm" bottom: "conv" top: "act" }
layer { name: "dw" type: "DepthWiseConvFoo" bottom: "act" top: "dw"
  convolution_param { num_output: 8 kernel_h: 3 kernel_w: 5 stride: 2 pad: 1 group: 8 } }
layer { name: "fc" type: "InnerProduct" bottom: "dw" top: "fc" inner_product_param { num_output: 10 } }
layer { name: "label" type: "Input" top: "label" input_param { shape { dim: 1 } } }
layer { name: "loss" type: "FancyLoss" bottom: "fc" bottom: "label" top: "loss" }
'''
    rows, total = summarize(text)
    by = {r.name: r for r in rows}
    assert by["gn"].top_shapes == [(1, 8, 30, 30)] and "blankWorld/GroupNorm-caffe" in by["gn"].carried
    # (30 + 2 - 3) // 2 + 1 = 15, (30 + 2 - 5) // 2 + 1 = 14; depthwise: 8 x 1 x 3 x 5 + 8
    assert by["dw"].top_shapes == [(1, 8, 15, 14)] and by["dw"].params == 8 * 15 + 8
    assert by["dw"].carried.startswith("convolution-like: convolution_param.num_output 8, kernel 3x5")
    assert by["fc"].top_shapes == [(1, 10)] and by["fc"].carried is None
    assert by["loss"].top_shapes == [()] and by["loss"].carried == "a loss: a scalar top"
    text_out = format_summary(rows, total)
    assert "FancyLoss~" in text_out and "GroupNorm~" in text_out and "DepthWiseConvFoo~" in text_out
    feet = [ln for ln in text_out.splitlines() if ln.startswith("~ shape carried: ")]
    assert [f.split(":")[1].strip() for f in feet] == ["GroupNorm (gn)", "DepthWiseConvFoo (dw)",
                                                        "FancyLoss (loss)"]
    with pytest.raises(CaffeError, match="unknown layer type 'GroupNorm'"):
        summarize(text, strict=True)


def test_rule_for_each_case_and_no_rule():
    same = rule_for(_layer('layer { name: "a" type: "HSwish" bottom: "x" top: "y" }'))
    assert same.stand_in.type == STAND_IN_SAME and "aovoc/caffe" in same.text
    assert all(isinstance(f, str) and "/" in f for f in SAME_SHAPE.values())
    from caffepy.layers.base import has_layer_type          # a registered type is built instead
    assert [t for t in SAME_SHAPE if has_layer_type(t)] == []
    scaled = rule_for(_layer('layer { name: "s" type: "GroupNorm" bottom: "x" bottom: "m" '
                             'top: "y" }'))
    assert "first bottom" in scaled.text and list(scaled.stand_in.bottom) == ["x", "m"]
    loss = rule_for(_layer('layer { name: "l" type: "SQUARED_HINGE_LOSS" bottom: "x" bottom: "t" '
                           'top: "l" loss_weight: 2 }'))
    assert loss.text == "a loss: a scalar top" and list(loss.stand_in.loss_weight) == [2.0]
    for text in ('layer { name: "a" type: "Mystery" bottom: "x" top: "y" }',         # no rule
                 'layer { name: "a" type: "HSwish" bottom: "x" top: "y" top: "z" }',  # 2 tops
                 'layer { name: "d" type: "FancyDeconv" bottom: "x" top: "y" '        # not conv
                 'convolution_param { num_output: 2 kernel_size: 2 stride: 2 } }',
                 'layer { name: "c" type: "ConvFoo" bottom: "x" top: "y" '            # no kernel
                 'convolution_param { num_output: 2 } }',
                 'layer { name: "c" type: "ConvFoo" bottom: "x" bottom: "w" top: "y" '  # 2 bottoms
                 'convolution_param { num_output: 2 kernel_size: 3 } }'):
        assert rule_for(_layer(text)) is None, text


def test_carriers_exist_only_while_summary_builds():
    from caffepy.layers.base import has_layer_type, layer_type_list
    assert not has_layer_type(STAND_IN_SAME)
    with carriers():
        assert has_layer_type(STAND_IN_SAME)
    assert not has_layer_type(STAND_IN_SAME) and STAND_IN_SAME not in layer_type_list()


def test_unknown_shapes_follow_joins_and_stop_at_a_blob_written_again():
    """A Concat of a known and an unknown blob is '?'; a layer that writes a blob of the same
    name again (not in place) makes it known for the layers after it."""
    text = HEAD + '''layer { name: "odd" type: "Mystery" bottom: "conv" top: "m" }
layer { name: "cat" type: "Concat" bottom: "conv" bottom: "m" top: "cat" }
layer { name: "relu" type: "ReLU" bottom: "cat" top: "cat" }
layer { name: "again" type: "Convolution" bottom: "conv" top: "m" convolution_param { num_output: 2 kernel_size: 1 } }
layer { name: "after" type: "ReLU" bottom: "m" top: "after" }
'''
    notes = []
    rows, _ = summarize(text, notes=notes)
    assert [(r.name, r.top_shapes) for r in rows][2:] == [
        ("odd", ["?"]), ("cat", ["?"]), ("relu", ["?"]), ("again", [(1, 2, 30, 30)]),
        ("after", [(1, 2, 30, 30)])]
    assert notes[0].endswith("shown as '?' with the 2 layer(s) that depend on its tops: cat, relu")


def test_layers_of_one_unknown_type_share_one_line_and_phases_are_kept_apart(tmp_path):
    text = HEAD + '''layer { name: "m1" type: "Mystery" bottom: "conv" top: "m1" include { phase: TRAIN } }
layer { name: "m2" type: "Mystery" bottom: "conv" top: "m2" }
layer { name: "r1" type: "ReLU" bottom: "m1" top: "r1" include { phase: TRAIN } }
layer { name: "ok" type: "ReLU" bottom: "conv" top: "ok" }
'''
    notes = []
    rows, _ = summarize(text, notes=notes)          # TEST: m1 and r1 are not in it
    assert [(r.name, r.top_shapes) for r in rows][2:] == [("m2", ["?"]), ("ok", [(1, 8, 30, 30)])]
    assert len(notes) == 1 and notes[0].startswith("layer 'm2' (type Mystery)")
    notes = []
    rows, _ = summarize(text, notes=notes, phase=caffe_pb2.TRAIN)
    assert [(r.name, r.top_shapes) for r in rows][2:] == [
        ("m1", ["?"]), ("m2", ["?"]), ("r1", ["?"]), ("ok", [(1, 8, 30, 30)])]
    assert notes == ["layer 'm1' (type Mystery and 1 more of this type: m2): no class and no "
                     "shape rule — a plug-in must supply it: @caffepy.register_layer(\"Mystery\") "
                     "loaded with --layers MODULE; shown as '?' with the 1 layer(s) that depend "
                     "on its tops: r1"]


def test_a_plug_in_replaces_the_rule(tmp_path):
    """Once a plug-in registers the type, the layer is built (no carried marker)."""
    from caffepy.layers import base
    from caffepy.layers.base import NeuronLayer, register_layer

    @register_layer("SeLuFoo")
    class _SeLuFoo(NeuronLayer):
        pass
    try:
        rows, _ = summarize(UNKNOWN_MIDDLE)
        assert _shapes(rows)[2:4] == [("act", "SeLuFoo", [(1, 8, 30, 30)], False),
                                      ("pool", "Pooling", [(1, 8, 15, 15)], False)]
    finally:
        base._REGISTRY.pop("SeLuFoo")


def test_a_carried_layer_that_fails_is_named_with_its_own_type():
    """A convolution-like layer whose kernel does not fit: the error names the fork's type, not
    the Convolution standing in for it."""
    text = HEAD + ('layer { name: "big" type: "MyConv" bottom: "conv" top: "big" '
                   'convolution_param { num_output: 4 kernel_size: 31 } }\n')
    with pytest.raises(CaffeError, match=r"layer 'big' \(MyConv, shape carried as a "
                                         r"Convolution's\): output spatial shape"):
        summarize(text)


def test_layers_without_tops_and_in_place_python_layers():
    text = HEAD + '''layer { name: "sink" type: "Sinky" bottom: "conv" }
layer { name: "py" type: "Python" bottom: "conv" top: "conv" python_param { module: "no_such_mod_x" layer: "L" } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "r" }
'''
    notes = []
    rows, total = summarize(text, notes=notes)
    assert [(r.name, r.top_shapes, r.carried) for r in rows][2:] == [
        ("sink", [], None), ("py", [(1, 8, 30, 30)], "in place: same shape as its bottom"),
        ("relu", [(1, 8, 30, 30)], None)]
    assert notes == ["layer 'sink' (type Sinky): no class and no shape rule — a plug-in must "
                     "supply it: @caffepy.register_layer(\"Sinky\") loaded with --layers MODULE; "
                     "listed without shapes (no tops)"]
    assert "~ shape carried: Python (py): in place" in format_summary(rows, total)


def test_a_carried_end_layer_shown_as_unbuilt_is_named_with_its_own_type():
    """A misspelled loss type at the end (a scalar stand-in carries it) reading a blob nothing
    makes: the note that shows it as '?' names the file's type, not the stand-in's."""
    text = HEAD + ('layer { name: "loss" type: "EucleadianLoss" bottom: "conv" bottom: "y" '
                   'top: "loss" }\n')
    notes = []
    rows, _ = summarize(text, notes=notes)
    note = next(n for n in notes if "does not build here" in n)
    assert note.startswith("layer 'loss' (EucleadianLoss) does not build here")
    assert "layer 'loss' (EucleadianLoss, shape carried): unknown bottom blob 'y'" in note
    assert "caffepy.summary" not in note
