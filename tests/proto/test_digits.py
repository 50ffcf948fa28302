"""DIGITS classification networks: InnerProduct layers without num_output take the class count."""
import logging

import numpy as np
import pytest

import caffepy
from caffepy import cli
from caffepy.errors import NetError
from caffepy.net import Net
from caffepy.proto import digits, io as proto_io
from caffepy.zoo.summary import summarize

# a DIGITS-style classifier: data layers given to the "train" / "val" stages, the loss kept out
# of "deploy", the probabilities only in it, and the classifier's num_output left to DIGITS
NET = '''
name: "digits_style"
layer { name: "input" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 6 } shape { dim: 2 } } }
layer { name: "hidden" type: "InnerProduct" bottom: "data" top: "hidden"
        inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "head" type: "InnerProduct" bottom: "hidden" top: "head"
        inner_product_param { weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "head" bottom: "label" top: "loss"
        exclude { stage: "deploy" } }
layer { name: "prob" type: "Softmax" bottom: "head" top: "prob" include { stage: "deploy" } }
'''
NO_STAGES = NET.replace('exclude { stage: "deploy" }', "").replace('include { stage: "deploy" }', "")


def test_only_open_inner_products_of_a_digits_network_are_class_layers():
    param = proto_io.read_net(NET)
    assert digits.is_digits_network(param)
    assert [lp.name for lp in digits.class_layers(param)] == ["head"]
    assert digits.class_layers(proto_io.read_net(NO_STAGES)) == []        # not DIGITS'
    zero = proto_io.read_net(NET.replace('"head"\n        inner_product_param {',
                                         '"head"\n        inner_product_param { num_output: 0'))
    assert digits.class_layers(zero) == []             # written out, as DIGITS' HasField sees it


def test_net_takes_the_count_and_asks_for_it_otherwise():
    net = Net(NET, caffepy.TEST, stages=["deploy"], num_classes=3)
    assert net.params["head"][0].data.shape == (3, 4)
    assert "prob" in net.outputs and "loss" not in net.outputs
    with pytest.raises(NetError, match=r"'head' leave num_output .* --num-classes N"):
        Net(NET, caffepy.TEST)
    with digits.class_count(5):                        # what a Solver's nets are built under
        assert Net(NET, caffepy.TRAIN).params["head"][0].data.shape == (5, 4)
    with pytest.raises(NetError, match="positive integer"):
        Net(NET, caffepy.TEST, num_classes=0)


def test_a_net_that_is_not_digits_keeps_caffes_error():
    with pytest.raises(NetError, match="num_output must be positive"):
        Net(NO_STAGES, caffepy.TEST, num_classes=3)


def test_summary_uses_a_stand_in_with_one_warning_strict_too(caplog):
    with caplog.at_level(logging.WARNING, logger="caffepy.proto.digits"):
        rows, _ = summarize(NET, strict=True)
    by = {r.name: r for r in rows}
    assert by["head"].top_shapes == [(2, digits.STAND_IN)]
    lines = [r.getMessage() for r in caplog.records if r.name == "caffepy.proto.digits"]
    assert len(lines) == 1 and "'head'" in lines[0] and "stand-in" in lines[0]
    rows, _ = summarize(NET, num_classes=7)
    assert {r.name: r for r in rows}["head"].params == 7 * 4 + 7


def test_cli_num_classes(tmp_path, capsys):
    path = tmp_path / "net.prototxt"
    path.write_text(NET)
    assert cli.main(["summary", str(path), "--num-classes", "3", "--strict"]) == 0
    out = capsys.readouterr()
    assert "stand-in" not in out.err and "2x3" in out.out
    assert cli.main(["time", "--model", str(path), "--iterations", "1", "--stage", "deploy"]) == 1
    assert "--num-classes N" in capsys.readouterr().err
    assert cli.main(["time", "--model", str(path), "--iterations", "1", "--stage", "deploy",
                     "--num-classes", "3"]) == 0
    dot = tmp_path / "net.dot"
    assert cli.main(["draw", str(path), "-o", str(dot)]) == 0
    assert "stand-in" in capsys.readouterr().err


def test_trained_net_forward_is_finite_with_the_count():
    net = Net(NET, caffepy.TEST, stages=["deploy"], num_classes=3)
    net.blobs["data"].data[...] = np.arange(12, dtype=np.float32).reshape(2, 6) / 12
    prob = net.forward()["prob"]
    assert prob.shape == (2, 3) and np.allclose(prob.sum(axis=1), 1)


def test_train_takes_num_classes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "net.prototxt").write_text(NET)
    (tmp_path / "solver.prototxt").write_text(
        'net: "net.prototxt" base_lr: 0.01 lr_policy: "fixed" max_iter: 1 display: 1 '
        'snapshot_after_train: false')
    assert cli.main(["train", "--solver", "solver.prototxt"]) == 1
    assert "--num-classes N" in capsys.readouterr().err
    assert cli.main(["train", "--solver", "solver.prototxt", "--num-classes", "3"]) == 0


def test_summary_of_a_phase_takes_digits_stage_of_that_phase():
    staged = NET.replace('''layer { name: "input" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 6 } shape { dim: 2 } } }''', '''
layer { name: "train-in" type: "Input" top: "data" top: "label" include { stage: "train" }
        input_param { shape { dim: 8 dim: 6 } shape { dim: 8 } } }
layer { name: "val-in" type: "Input" top: "data" top: "label" include { stage: "val" }
        input_param { shape { dim: 3 dim: 6 } shape { dim: 3 } } }''')
    for phase, stage, n in ((caffepy.TEST, "val", 3), (caffepy.TRAIN, "train", 8)):
        notes = []
        rows, _ = summarize(staged, phase=phase, notes=notes, num_classes=4)
        assert any("with stage %s" % stage in note for note in notes)
        assert {r.name: r for r in rows}["head"].top_shapes == [(n, 4)]


def test_read_for_run_completes_as_summary_does():
    from caffepy import zoo
    param = zoo.read_for_run(NET)
    assert [lp.inner_product_param.num_output for lp in param.layer if lp.name == "head"] == \
        [digits.STAND_IN]
    param = zoo.read_for_run(NET, num_classes=3)
    net = Net(zoo.constant_fillers(param), caffepy.TEST, stages=["deploy"])
    assert net.blobs["prob"].shape == (2, 3)
