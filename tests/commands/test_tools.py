"""``caffepy test`` / ``time`` / ``plot`` / ``device_query`` and tools/parse_log.py on a real log."""
import csv
import importlib.util
import os
import re

import pytest

from caffepy import cli
from caffepy.commands import _gpu

from . import nets

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _parse_log_tool():
    spec = importlib.util.spec_from_file_location("parse_log", os.path.join(ROOT, "tools", "parse_log.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def trained(tmp_path, monkeypatch):
    """A tmp dir holding a net, a solver, snapshots and the glog log of a 10-iteration run."""
    monkeypatch.chdir(nets.write(tmp_path))
    assert cli.main(["train", "-solver", "solver.prototxt", "-log", "train.log"]) == 0
    return tmp_path


def test_test_command(trained, capsys):
    capsys.readouterr()
    assert cli.main(["test", "-model", "net.prototxt", "-weights", "snap/tiny_iter_10.caffemodel",
                     "-iterations", "3"]) == 0
    lines = [re.sub(r"^\S+ \S+ +\d+ \S+\] ", "", l) for l in capsys.readouterr().err.splitlines()]
    assert "Running for 3 iterations." in lines and "Use CPU." in lines
    assert sum(bool(re.fullmatch(r"Batch \d, accuracy = [\d.e+-]+", l)) for l in lines) == 3
    assert sum(bool(re.fullmatch(r"Batch \d, loss = [\d.e+-]+", l)) for l in lines) == 3
    assert any(re.fullmatch(r"Loss: [\d.e+-]+", l) for l in lines)
    assert any(re.fullmatch(r"loss = ([\d.e+-]+) \(\* 1 = \1 loss\)", l) for l in lines)
    assert any(re.fullmatch(r"accuracy = [\d.e+-]+", l) for l in lines)
    assert cli.main(["test", "-model", "net.prototxt"]) == 1
    assert "Need model weights to score" in capsys.readouterr().err


@pytest.mark.parametrize("phase", ["", "TEST"])
def test_time_command(phase, trained, capsys):
    capsys.readouterr()
    argv = ["time", "-model", "net.prototxt", "-iterations", "2"] + (["-phase", phase] if phase else [])
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    for layer in ("data", "ip", "loss"):
        assert re.search(r"\] +%s\tforward: [\d.e+-]+ ms\." % layer, err)
        assert re.search(r"\] +%s\tbackward: [\d.e+-]+ ms\." % layer, err)
    assert ("accuracy\tforward" in err) == (phase == "TEST")
    for what in ("Average Forward pass", "Average Backward pass", "Average Forward-Backward", "Total Time"):
        assert re.search(r"\] %s: [\d.e+-]+ ms\." % what, err), what
    assert "Iteration: 2 forward-backward time:" in err
    assert cli.main(["time", "-model", "net.prototxt", "-phase", "VAL"]) == 1


def test_parse_log_on_a_real_training_log(trained):
    log_text = open("train.log").read()
    assert "\r" not in log_text and "\x1b" not in log_text  # no progress bar in a log file
    tool = _parse_log_tool()
    os.mkdir("csv")
    assert tool.main(["train.log", "csv"]) == 0
    with open("csv/train.log.train") as f:
        train = list(csv.DictReader(f))
    with open("csv/train.log.test") as f:
        test = list(csv.DictReader(f))
    assert list(train[0].keys()) == ["NumIters", "Seconds", "LearningRate", "loss"]
    assert list(test[0].keys()) == ["NumIters", "Seconds", "LearningRate", "accuracy", "loss"]
    assert [float(r["NumIters"]) for r in train] == [0, 2, 4, 6, 8]
    assert [float(r["NumIters"]) for r in test] == [0, 5, 10]
    # As in Caffe's script, a row takes the lr printed before its outputs (the previous display's)
    assert [float(r["LearningRate"]) for r in train] == pytest.approx([0.05, 0.05, 0.05, 0.025, 0.025])
    assert all(0 <= float(r["accuracy"]) <= 1 for r in test)
    seconds = [float(r["Seconds"]) for r in train]
    assert seconds == sorted(seconds) and seconds[0] >= 0
    # the losses are the ones the log printed
    printed = re.findall(r"Train net output #0: loss = ([\d.e+-]+)", log_text)
    assert [float(r["loss"]) for r in train] == [float(x) for x in printed]


def test_bvlc_parse_log_regexes_match(trained):
    """The expressions Caffe's tools/extra/parse_log.py and parse_log.sh look for."""
    text = open("train.log").read()
    assert re.search(r"Solving tiny", text)
    assert re.search(r"Train net output #(\d+): (\S+) = ([\.\deE+-]+)", text)
    assert re.search(r"Test net output #(\d+): (\S+) = ([\.\deE+-]+)", text)
    assert re.search(r"lr = ([-+]?[0-9]*\.?[0-9]+([eE]?[-+]?[0-9]+)?)", text)
    assert re.search(r"Iteration \d+, Testing net \(#0\)", text)
    for line in text.splitlines():
        if "Test net output #0" in line:
            assert line.split()[10] == line.rsplit("= ", 1)[1]  # parse_log.sh: awk '{print $11}'


@pytest.mark.slow
def test_plot(trained, capsys):
    pytest.importorskip("matplotlib")
    assert cli.main(["plot", "train.log", "-o", "curves.png"]) == 0
    with open("curves.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    open("empty.log", "w").write("nothing\n")
    assert cli.main(["plot", "empty.log"]) == 1
    assert "not a Caffe training log" in capsys.readouterr().err


def test_device_query(capsys):
    if _gpu.device_count():
        assert cli.main(["device_query", "-gpu", "0"]) == 0
        err = capsys.readouterr().err
        assert re.search(r"\] Device id: +0", err) and "Total global memory:" in err
    else:
        assert cli.main(["device_query"]) == 1
        assert "no CUDA device found" in capsys.readouterr().err
