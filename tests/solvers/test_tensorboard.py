"""TensorBoard curves (caffepy train --tensorboard DIR, $CAFFEPY_TENSORBOARD): the event files,
read back with TensorBoard's own reader, hold the values of the solver's log lines."""
import os
import re
import signal
import sys

import pytest

import caffepy
from caffepy import cli
from caffepy.log import teardown as teardown_log
from caffepy.solvers import tensorboard

from ..commands import nets
from . import helpers

pytest.importorskip("tensorboardX")
event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator")


@pytest.fixture(autouse=True)
def _restore_log_and_mode():
    yield
    teardown_log()
    caffepy.set_mode_cpu()


def _read(logdir):
    """{tag: [(step, value)]} of the event files in ``logdir``."""
    acc = event_accumulator.EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _close(a, b):
    """Equal to the 6 significant digits a log line prints."""
    return a == pytest.approx(b, rel=2e-5, abs=1e-12)


def _check(series, expected):
    """``series`` [(step, value)] equals ``expected`` [(step, value from a log line)]."""
    assert [s for s, _ in series] == [s for s, _ in expected]
    for (step, value), (_, logged) in zip(series, expected):
        assert _close(value, logged), (step, value, logged)


def _test_outputs(text):
    """[(iter, net #, name, value)] from ``Iteration N, Testing net (#i)`` + ``Test net output``."""
    out, current = [], None
    for line in text.splitlines():
        m = re.search(r"Iteration (\d+), Testing net \(#(\d+)\)", line)
        if m:
            current = (int(m.group(1)), int(m.group(2)))
        m = re.search(r"Test net output #\d+: (\w+) = (\S+)", line)
        if m:
            out.append(current + (m.group(1), float(m.group(2))))
    return out


def test_train_flag_writes_the_logged_curves(tmp_path, monkeypatch):
    monkeypatch.chdir(nets.write(tmp_path, max_iter=10))
    monkeypatch.delenv(tensorboard.ENV, raising=False)
    board = tmp_path / "tb"
    assert cli.main(["train", "--solver", "solver.prototxt", "--tensorboard", str(board),
                     "--log", "train.log"]) == 0
    text = (tmp_path / "train.log").read_text()
    got = _read(board)
    # display 2, max_iter 10: iterations 0, 2, 4, 6, 8 and the final loss at 10
    shown = [(int(i), float(v)) for i, v in
             re.findall(r"Iteration (\d+) \(\S+ iter/s, \S+ iters\), loss = (\S+)", text)]
    final = [(int(i), float(v)) for i, v in re.findall(r"Iteration (\d+), loss = (\S+)", text)]
    assert [s for s, _ in shown] == [0, 2, 4, 6, 8] and [s for s, _ in final] == [10]
    _check(got["train/loss"], shown + final)
    raw = [float(v) for v in re.findall(r"Train net output #0: loss = (\S+)", text)]
    _check(got["train/output/loss"], [(s, v) for (s, _), v in zip(shown, raw)])
    _check(got["train/loss_raw"], [(s, v) for (s, _), v in zip(shown, raw)])  # iter_size 1
    lrs = [(int(i), float(v)) for i, v in re.findall(r"Iteration (\d+), lr = (\S+)", text)]
    _check(got["train/lr"], lrs)
    assert {v for _, v in lrs} == {0.05, 0.025, 0.0125}                      # step policy
    rates = [(int(i), float(v)) for i, v in re.findall(r"Iteration (\d+) \((\S+) iter/s", text)]
    _check(got["train/steps_per_s"], rates)
    # test_interval 5 (and test_initialization): iterations 0, 5, 10, outputs loss and accuracy
    tests = _test_outputs(text)
    assert sorted({(i, n) for i, n, _, _ in tests}) == [(0, 0), (5, 0), (10, 0)]
    for name in ("loss", "accuracy"):
        _check(got["test/0/%s" % name], [(i, v) for i, _, o, v in tests if o == name])
    assert not tensorboard._open                   # closed at the end of the run


def test_environment_default_and_pycaffe_solve(tmp_path, monkeypatch):
    """$CAFFEPY_TENSORBOARD: a solver built from Python writes too; solve() closes the file."""
    monkeypatch.chdir(tmp_path)          # the final snapshot (no prefix) lands here
    monkeypatch.setenv(tensorboard.ENV, str(tmp_path / "env"))
    solver = helpers.make_solver('base_lr: 0.01 lr_policy: "fixed" max_iter: 4 display: 1')
    assert solver.tensorboard_dir == str(tmp_path / "env")
    solver.solve()
    got = _read(tmp_path / "env")
    assert [s for s, _ in got["train/loss"]] == [0, 1, 2, 3, 4]
    assert [v for _, v in got["train/lr"]] == pytest.approx([0.01] * 4)        # float32
    assert not solver._boards and not tensorboard._open
    monkeypatch.delenv(tensorboard.ENV)
    assert helpers.make_solver('lr_policy: "fixed" max_iter: 1').tensorboard_dir is None


def test_closed_on_error_and_on_signal(tmp_path, monkeypatch):
    """A run stopped by an error, or by SIGTERM (stop effect), leaves complete event files."""
    monkeypatch.chdir(nets.write(tmp_path, max_iter=10))
    monkeypatch.delenv(tensorboard.ENV, raising=False)
    from caffepy.solvers.sgd import SGDSolver
    real = SGDSolver.apply_update

    def kill_at_3(self):
        real(self)
        if self.iter == 3:
            os.kill(os.getpid(), signal.SIGTERM)
    monkeypatch.setattr(SGDSolver, "apply_update", kill_at_3)
    assert cli.main(["train", "--solver", "solver.prototxt", "--tensorboard", "sig"]) == 0
    got = _read(tmp_path / "sig")
    assert [s for s, _ in got["train/loss"]] == [0, 2]           # stopped after iteration 3
    assert not tensorboard._open

    def fail_at_3(self):
        real(self)
        if self.iter == 3:
            raise RuntimeError("disk on fire")
    monkeypatch.setattr(SGDSolver, "apply_update", fail_at_3)
    with pytest.raises(RuntimeError):
        cli.main(["train", "--solver", "solver.prototxt", "--tensorboard", "err"])
    got = _read(tmp_path / "err")
    assert [s for s, _ in got["train/loss"]] == [0, 2]
    assert not tensorboard._open


def test_distributed_run_writes_one_series_per_group(tmp_path, monkeypatch):
    """2 worker groups (in-process engine): group<g>/loss, lr, steps_per_s at the steps of the
    ``Iteration N (group g of 2)`` lines, with their values."""
    monkeypatch.chdir(nets.write(tmp_path, max_iter=8))
    monkeypatch.delenv(tensorboard.ENV, raising=False)
    (tmp_path / "cluster.prototxt").write_text(
        'nworker_groups: 2 nworkers_per_group: 1 nservers_per_group: 1 engine: "inproc" '
        'workspace: "%s/"\n' % (tmp_path / "ws"))
    assert cli.main(["train", "--solver", "solver.prototxt", "--cluster", "cluster.prototxt",
                     "--tensorboard", "tb", "--log", "train.log"]) == 0
    text = (tmp_path / "train.log").read_text()
    lines = re.findall(r"Iteration (\d+) \(group (\d) of 2\): loss = (\S+), lr = (\S+), "
                       r"(\S+) steps/s", text)
    for g in (0, 1):
        got = _read(tmp_path / "tb" / ("group%d" % g))        # a run folder per group
        assert sorted(got) == ["group%d/%s" % (g, t) for t in ("loss", "lr", "steps_per_s")]
        mine = [(int(i), float(loss), float(lr), float(rate))
                for i, gg, loss, lr, rate in lines if int(gg) == g]
        assert [i for i, _, _, _ in mine] == [0, 2, 4, 6]
        _check(got["group%d/loss" % g], [(i, v) for i, v, _, _ in mine])
        _check(got["group%d/lr" % g], [(i, v) for i, _, v, _ in mine])
        steps = got["group%d/steps_per_s" % g]
        assert [s for s, _ in steps] == [0, 2, 4, 6]
        for (_, v), (_, _, _, logged) in zip(steps, mine):
            assert v == pytest.approx(logged, rel=5e-3)                   # logged as %.3g
    # the final test pass (rank 0) is written as in a single-process run
    tests = _test_outputs(text)
    got = _read(tmp_path / "tb")
    _check(got["test/0/accuracy"], [(i, v) for i, _, o, v in tests if o == "accuracy"])
    assert not tensorboard._open


def test_missing_writer_is_one_line(tmp_path, monkeypatch):
    """Without tensorboardX, --tensorboard stops with one line saying what to install."""
    for name in ("tensorboardX", "tensorboardX.event_file_writer", "tensorboardX.proto"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(caffepy.errors.CaffeError, match=r"pip install 'caffepy\[tensorboard\]'"):
        tensorboard.Board(str(tmp_path / "tb"))
