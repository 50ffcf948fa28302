import argparse

import pytest

from caffepy.commands import summary as cmd
from caffepy.zoo.summary import format_summary, summarize

NET = '''
name: "tiny"
layer { name: "data" type: "Data" top: "data" top: "label"
        data_param { source: "nowhere" batch_size: 4 } transform_param { crop_size: 8 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 5 kernel_size: 3 } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip" inner_product_param { num_output: 7 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
'''


def test_summary_rows_and_totals():
    rows, total = summarize(NET)
    by = {r.name: r for r in rows}
    assert by["data"].type == "Input" and by["data"].top_shapes == [(4, 3, 8, 8), (4,)]
    assert by["conv"].top_shapes == [(4, 5, 6, 6)]
    assert by["conv"].params == 5 * 3 * 9 + 5
    assert by["conv"].flops == 2 * (5 * 3 * 9) * 36 * 4 + 4 * 5 * 36
    assert by["pool"].flops == 4 * 5 * 3 * 3 * 4
    assert by["ip"].params == 7 * 45 + 7 and by["ip"].flops == 2 * 7 * 45 * 4
    assert by["relu"].memory == 0                       # in place
    assert by["ip"].memory == (4 * 7 + 7 * 45 + 7) * 4
    assert total.params == sum(r.params for r in rows) and total.flops == sum(r.flops for r in rows)
    text = format_summary(rows, total)
    assert "conv" in text and "total" in text.splitlines()[-1]


def test_fork_subclasses_of_convolution_and_inner_product_count_as_those():
    forked = NET.replace('type: "Convolution"', 'type: "BinaryConvolution"').replace(
        'type: "InnerProduct"', 'type: "FcRistretto"')
    plain = {r.name: r.flops for r in summarize(NET)[0]}
    rows, _ = summarize(forked)
    assert {r.name: r.type for r in rows}["conv"] == "BinaryConvolution"
    assert {r.name: r.flops for r in rows} == plain


def test_summary_input_override_and_errors():
    rows, _ = summarize(NET, inputs={"data": (2, 3, 10, 10), "label": (2,)})
    assert rows[1].top_shapes == [(2, 5, 8, 8)]
    with pytest.raises(ValueError, match="nosuch"):
        summarize(NET, inputs={"nosuch": (1,)})


def test_summary_command(tmp_path, capsys):
    path = tmp_path / "net.prototxt"
    path.write_text(NET)
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    assert cmd.run(parser.parse_args([str(path), "--input", "data=1,3,8,8", "--input", "label=1",
                                      "--phase", "train"])) == 0
    out = capsys.readouterr().out
    assert "1x5x6x6" in out and "SoftmaxWithLoss" in out
    with pytest.raises(ValueError, match="NAME=N,C,H,W"):
        cmd.run(parser.parse_args([str(path), "--input", "data"]))


def test_python_data_layer_with_a_builtin_stand_in_gives_its_own_shapes(tmp_path):
    """py-faster-rcnn's roi_data_layer is not importable here: caffepy's RoIDataLayer sets the
    tops up (end to end: data, im_info, gt_boxes; Fast R-CNN: data, rois, labels, bbox_*)."""
    from caffepy.zoo.summary import summarize
    from caffepy.proto import caffe_pb2
    from caffepy.proto.harvest_policy import structure_only
    head = ('layer { name: "input-data" type: "Python" top: "data" %s python_param { '
            'module: "roi_data_layer.layer" layer: "RoIDataLayer" param_str: "\'num_classes\': 21" } }\n'
            'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" '
            'convolution_param { num_output: 4 kernel_size: 3 } }\n')
    end2end = head % 'top: "im_info" top: "gt_boxes"'
    fast = head % ('top: "rois" top: "labels" top: "bbox_targets" top: "bbox_inside_weights" '
                   'top: "bbox_outside_weights"')
    for text, names in ((end2end, ["data", "im_info", "gt_boxes"]), (fast, ["data", "rois"])):
        path = tmp_path / "train.prototxt"
        path.write_text(text)
        with structure_only():
            rows, _ = summarize(str(path), phase=caffe_pb2.TRAIN)
        assert [r.name for r in rows[:2]] == ["input-data", "conv"]
        shapes = rows[0].top_shapes
        assert len(shapes) == len(text.split("top:")) - 2       # every declared top of the layer
        assert tuple(shapes[0])[:2] == ((1, 3) if "im_info" in text else (2, 3))


def test_terminal_python_layer_without_its_module_is_shown_with_unknown_tops(tmp_path):
    """A Python loss whose module is absent: the rest of the net is built and the layer is listed
    with '?' tops and a note; a layer reading its top is '?' too; strict: an error."""
    import pytest
    from caffepy.errors import CaffeError
    from caffepy.zoo.summary import format_summary, summarize
    body = ('layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 '
            'dim: 8 dim: 8 } } }\n'
            'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" '
            'inner_product_param { num_output: 2 } }\n'
            'layer { name: "loss" type: "Python" bottom: "ip" top: "loss" python_param { '
            'module: "no_such_module_here" layer: "DiceLoss" } }\n')
    path = tmp_path / "net.prototxt"
    path.write_text(body)
    notes = []
    rows, total = summarize(str(path), notes=notes)
    assert [(r.name, r.top_shapes) for r in rows] == [("data", [(1, 3, 8, 8)]), ("ip", [(1, 2)]),
                                                    ("loss", ["?"])]
    assert "no_such_module_here" in notes[0] and "'?'" in notes[0]
    loss_line = [ln for ln in format_summary(rows, total).splitlines() if ln.startswith("loss")]
    assert loss_line[0].split()[:3] == ["loss", "Python", "?"]
    path.write_text(body + 'layer { name: "after" type: "ReLU" bottom: "loss" top: "after" }\n')
    notes = []
    rows, _ = summarize(str(path), notes=notes)
    assert [(r.name, r.top_shapes) for r in rows][2:] == [("loss", ["?"]), ("after", ["?"])]
    assert len(notes) == 1 and "that depend on its tops: after" in notes[0]
    with pytest.raises(CaffeError, match="no_such_module_here"):
        summarize(str(path), strict=True)


def test_terminal_layers_of_unknown_types_are_shown_with_unknown_tops(tmp_path):
    """An NMS and a decoder no layer registers, at the end of a net (one reading the other): the
    net before them is built; a layer reading an unknown type's top is '?' too; strict: an
    error naming the type."""
    import pytest
    from caffepy.errors import CaffeError
    from caffepy.zoo.summary import summarize
    body = ('layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 '
            'dim: 8 dim: 8 } } }\n'
            'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" '
            'convolution_param { num_output: 2 kernel_size: 3 } }\n'
            'layer { name: "nms" type: "ForkNms" bottom: "conv" top: "peaks" }\n'
            'layer { name: "decode" type: "ForkDecode" bottom: "peaks" bottom: "conv" top: "out" }\n')
    path = tmp_path / "net.prototxt"
    path.write_text(body)
    notes = []
    rows, _ = summarize(str(path), notes=notes)
    assert [(r.name, r.type, r.top_shapes) for r in rows][1:] == [
        ("conv", "Convolution", [(1, 2, 6, 6)]), ("nms", "ForkNms", ["?"]),
        ("decode", "ForkDecode", ["?"])]
    assert len(notes) == 2 and notes[0].startswith("layer 'nms' (type ForkNms): no class and no "
                                                   "shape rule")
    assert "the 1 layer(s) that depend on its tops: decode" in notes[0]
    path.write_text(body + 'layer { name: "relu" type: "ReLU" bottom: "out" top: "relu" }\n')
    rows, _ = summarize(str(path))
    assert rows[-1].name == "relu" and rows[-1].top_shapes == ["?"]
    with pytest.raises(CaffeError, match="unknown layer type 'ForkNms'"):
        summarize(str(path), strict=True)


def test_terminal_layers_that_fail_to_set_up_are_shown_with_unknown_tops(tmp_path):
    """A deploy file's leftover Accuracy (its label blob absent) and a fork's loss with one bottom
    more than Caffe's: no other layer reads their tops, so summary builds the rest, lists them
    with '?' tops and says why; the same failure in a layer that others read stays an error, and
    a net (Net) is never built without them. (Shape errors are not dropped: they are the input
    size search's, and the user's at a size the user gives.)"""
    import pytest
    from caffepy import Net
    from caffepy.errors import CaffeError
    from caffepy.zoo.summary import summarize
    head = ('layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 '
            'dim: 4 dim: 4 } } }\n'
            'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" '
            'inner_product_param { num_output: 5 } }\n')
    tail = ('layer { name: "accuracy" type: "Accuracy" bottom: "ip" bottom: "label" '
            'top: "accuracy" }\n'
            'layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "ip" bottom: "ip" '
            'top: "loss" }\n')
    path = tmp_path / "deploy.prototxt"
    path.write_text(head + tail)
    notes = []
    rows, _ = summarize(str(path), notes=notes)
    assert [(r.name, r.top_shapes) for r in rows] == [
        ("data", [(2, 3, 4, 4)]), ("ip", [(2, 5)]), ("accuracy", ["?"]), ("loss", ["?"])]
    assert len(notes) == 2
    assert "unknown bottom blob 'label'" in notes[0] and "deploy.prototxt:3" in notes[0]
    assert "'loss' (EuclideanLoss)" in notes[1] and "'?'" in notes[1]
    with pytest.raises(CaffeError, match="unknown bottom blob 'label'"):
        Net(str(path), 1)
    path.write_text(head + tail + 'layer { name: "after" type: "ReLU" bottom: "loss" top: "r" }\n')
    with pytest.raises(CaffeError, match="EuclideanLoss"):
        summarize(str(path))


def test_another_forks_form_of_a_stood_in_python_data_layer_is_replaced(tmp_path):
    """py-faster-rcnn's RoIDataLayer has a built-in stand-in; a fork's layer of the same module
    and name with other tops (R-C3D's, 2 tops) is not what it stands in for: it is replaced as any
    Python data layer whose module is absent, and the note says why and names the tops to give."""
    from caffepy.zoo.summary import summarize
    path = tmp_path / "train.prototxt"
    path.write_text(
        'layer { name: "data" type: "Python" top: "data" top: "gt" python_param { '
        'module: "roi_data_layer.layer" layer: "RoIDataLayer" param_str: "\'num_classes\': 21" } }\n'
        'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" '
        'convolution_param { num_output: 2 kernel_size: 3 } }\n')
    notes = []
    rows, _ = summarize(str(path), phase=1, notes=notes, strict=True)
    assert rows[0].type == "Input" and rows[1].top_shapes == [(1, 2, 222, 222)]
    assert "is not importable and caffepy's stand-in for it does not take this file's form" in \
        notes[0] and "RoIDataLayer" in notes[0]
    assert notes[0].endswith("give them with --input data=N,C,H,W --input gt=N,...")
