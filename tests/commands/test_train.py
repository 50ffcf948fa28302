"""``caffepy train``: flags (gflags spellings), resume / finetune, stages, signals."""
import os
import signal

import numpy as np
import pytest

from caffepy import cli
from caffepy.net import Net
from caffepy.proto import caffe_pb2
from caffepy.solvers import get_solver
from caffepy.solvers.signals import SignalHandler

from . import nets


def _weights(path, phase=caffe_pb2.TEST):
    net = Net("net.prototxt", phase, weights=path)
    return [b.data.copy() for b in net.learnable_params]


@pytest.mark.parametrize("argv", [
    ["train", "-solver", "solver.prototxt"],
    ["train", "-solver=solver.prototxt"],
    ["train", "--solver", "solver.prototxt"],
    ["train", "--solver=solver.prototxt", "-sigint_effect=none", "-sighup_effect", "stop"],
])
def test_gflags_spellings(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(nets.write(tmp_path, max_iter=4))
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "Starting Optimization" in err and err.rstrip().endswith("Optimization Done.")
    assert os.path.exists("snap/tiny_iter_4.caffemodel")


def test_parser_reads_every_flag():
    args = cli.build_parser().parse_args(cli.normalize_gflags(
        ["train", "-solver", "s", "-weights=a,b", "-gpu", "all", "-stage=x,y", "-level", "2",
         "-sigint_effect", "snapshot", "-sighup_effect=none", "-iterations", "7", "-log", "f"]))
    assert (args.solver, args.weights, args.gpu, args.stage, args.level) == ("s", "a,b", "all", "x,y", 2)
    assert (args.sigint_effect, args.sighup_effect, args.iterations, args.log) == ("snapshot", "none", 7, "f")


@pytest.mark.parametrize("argv, msg", [
    (["train"], "Need a solver definition"),
    (["train", "-solver", "solver.prototxt", "-weights", "a", "-snapshot", "b"],
     "Give a snapshot to resume training or weights to finetune but not both."),
    (["train", "-solver", "solver.prototxt", "-sigint_effect", "explode"], 'Invalid signal effect "explode"'),
    (["train", "-solver", "missing.prototxt"], "missing.prototxt"),
    (["train", "-solver", "solver.prototxt", "-gpu", "x"], "--gpu must be 'all' or device ids"),
])
def test_errors_are_one_line(argv, msg, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(nets.write(tmp_path))
    assert cli.main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert msg in err[-1] and err[-1].startswith("caffepy train: error: ")


def test_resume_from_snapshot_matches_uninterrupted(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(nets.write(tmp_path, solver_type="Adam", constant_data=True))
    assert cli.main(["train", "-solver", "solver.prototxt"]) == 0
    full = _weights("snap/tiny_iter_10.caffemodel")
    for f in ("snap/tiny_iter_8.caffemodel", "snap/tiny_iter_8.solverstate",
              "snap/tiny_iter_10.caffemodel", "snap/tiny_iter_10.solverstate"):
        os.remove(f)
    assert cli.main(["train", "-solver", "solver.prototxt", "-snapshot", "snap/tiny_iter_4.solverstate"]) == 0
    assert "Resuming from snap/tiny_iter_4.solverstate" in capsys.readouterr().err
    for a, b in zip(full, _weights("snap/tiny_iter_10.caffemodel")):
        assert np.array_equal(a, b)


def test_finetune_from_weights(tmp_path, monkeypatch):
    monkeypatch.chdir(nets.write(tmp_path, max_iter=4))
    assert cli.main(["train", "-solver", "solver.prototxt"]) == 0
    start = _weights("snap/tiny_iter_4.caffemodel")
    (tmp_path / "solver.prototxt").write_text(
        (tmp_path / "solver.prototxt").read_text().replace("base_lr: 0.05", "base_lr: 0")
        .replace("snap/tiny", "snap/ft"))
    assert cli.main(["train", "-solver", "solver.prototxt", "-weights", "snap/tiny_iter_4.caffemodel"]) == 0
    for a, b in zip(start, _weights("snap/ft_iter_4.caffemodel")):
        assert np.array_equal(a, b)  # lr 0: the finetuned net kept the copied weights


def test_stage_and_level_reach_the_train_net(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(nets.write(tmp_path, max_iter=1))
    assert cli.main(["train", "-solver", "solver.prototxt", "-stage", "relu", "-level", "3"]) == 0
    err = capsys.readouterr().err
    assert 'stage: "relu"' in err and "level: 3" in err
    model = caffe_pb2.NetParameter()
    model.ParseFromString(open("snap/tiny_iter_1.caffemodel", "rb").read())
    assert "extra" in [lp.name for lp in model.layer]


def test_iterations_is_ignored_with_a_warning(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(nets.write(tmp_path, max_iter=2))
    assert cli.main(["train", "-solver", "solver.prototxt", "-iterations", "100"]) == 0
    err = capsys.readouterr().err
    assert "--iterations is ignored by train" in err and os.path.exists("snap/tiny_iter_2.caffemodel")


@pytest.mark.parametrize("sig, effect, expect_iter, early", [
    ("SIGINT", "stop", 3, True), ("SIGHUP", "snapshot", 10, False), ("SIGINT", "none", 10, False)])
def test_signals(sig, effect, expect_iter, early, tmp_path, monkeypatch):
    monkeypatch.chdir(nets.write(tmp_path))
    before = signal.getsignal(signal.SIGINT)   # SIG_IGN where pytest runs as a background job
    solver = get_solver("solver.prototxt")
    kw = {"sigint_effect": effect} if sig == "SIGINT" else {"sighup_effect": effect}
    with SignalHandler(**kw) as handler:
        solver.set_action_function(handler.action)
        solver.add_callback(lambda: solver.iter == 2 and os.kill(os.getpid(), getattr(signal, sig)),
                            lambda: None)
        solver.solve()
    assert solver.iter == expect_iter and solver.requested_early_exit == early
    if sig == "SIGHUP":
        assert os.path.exists("snap/tiny_iter_3.solverstate")  # asked during iteration 2
    assert signal.getsignal(signal.SIGINT) is before           # put back as it was
