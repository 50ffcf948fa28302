"""SIGINT, SIGHUP and SIGTERM sent to a running ``caffepy train`` (a subprocess): each effect
(stop / snapshot / none) as Caffe's SignalHandler, the snapshot written and loadable, exit 0."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NET = """name: "tiny"
layer { name: "data" type: "DummyData" top: "data" top: "label"
        dummy_data_param { shape { dim: 6 dim: 4 } shape { dim: 6 }
                           data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"""
SOLVER = ('net: "net.prototxt" base_lr: 0.01 momentum: 0.9 lr_policy: "fixed" max_iter: 10000000 '
          'display: 50 snapshot_prefix: "snap/tiny" random_seed: 7 solver_mode: CPU\n')


class Train(object):
    """``caffepy train`` in a subprocess; its stderr lines collected by a thread."""

    def __init__(self, cwd, *flags):
        env = dict(os.environ, PYTHONPATH=ROOT)
        env.pop("CAFFEPY_DEBUG", None)
        self.p = subprocess.Popen([sys.executable, "-m", "caffepy", "train", "--solver",
                                   "solver.prototxt"] + list(flags), cwd=str(cwd), env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)
        self.lines = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.p.stderr), daemon=True)
        self.reader.start()

    def wait_for(self, text, after=0, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            for i, line in enumerate(list(self.lines)[after:], after):
                if text in line:
                    return i
            assert self.p.poll() is None, "".join(self.lines)[-2000:]
            time.sleep(0.05)
        self.p.kill()
        raise AssertionError("no %r within %d s: %s" % (text, timeout, "".join(self.lines)[-2000:]))

    def finish(self, timeout=60):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise
        self.reader.join(5)
        return rc, "".join(self.lines)


def _snapshots(tmp_path):
    return sorted(int(n.split("_iter_")[1].split(".")[0])
                  for n in os.listdir(tmp_path / "snap") if n.endswith(".solverstate"))


def _loads(tmp_path, it, monkeypatch):
    from caffepy.solvers import get_solver
    monkeypatch.chdir(tmp_path)
    solver = get_solver("solver.prototxt")
    solver.restore("snap/tiny_iter_%d.solverstate" % it)
    assert solver.iter == it


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "net.prototxt").write_text(NET)
    (tmp_path / "solver.prototxt").write_text(SOLVER)
    (tmp_path / "snap").mkdir()
    return tmp_path


@pytest.mark.parametrize("sig, flags", [
    ("SIGINT", []), ("SIGTERM", []), ("SIGHUP", ["--sighup_effect", "stop"]),
    ("SIGTERM", ["--sigterm_effect=stop"])])
@pytest.mark.slow
def test_stop_effect_finishes_the_iteration_and_snapshots(sig, flags, workdir, monkeypatch):
    run = Train(workdir, *flags)
    run.wait_for("Iteration 100,")
    os.kill(run.p.pid, getattr(signal, sig))
    rc, err = run.finish()
    assert rc == 0, err[-2000:]
    assert "Optimization stopped early." in err and "Traceback" not in err
    its = _snapshots(workdir)
    assert len(its) == 1 and its[0] > 100           # the snapshot_after_train one
    _loads(workdir, its[0], monkeypatch)


@pytest.mark.parametrize("sig, flags", [
    ("SIGHUP", []), ("SIGTERM", ["--sigterm_effect", "snapshot"]),
    ("SIGINT", ["-sigint_effect", "snapshot"])])
@pytest.mark.slow
def test_snapshot_effect_snapshots_and_goes_on(sig, flags, workdir, monkeypatch):
    run = Train(workdir, *flags)
    run.wait_for("Iteration 100,")
    os.kill(run.p.pid, getattr(signal, sig))
    at = run.wait_for("Snapshotting solver state")
    run.wait_for("Iteration", after=at + 1)          # training went on
    os.kill(run.p.pid, signal.SIGINT if sig != "SIGINT" else signal.SIGTERM)
    rc, err = run.finish()
    assert rc == 0, err[-2000:]
    its = _snapshots(workdir)
    assert len(its) == 2 and its[0] < its[1]        # the signal's, then the stop's
    for it in its:
        _loads(workdir, it, monkeypatch)


@pytest.mark.parametrize("sig, flag", [("SIGTERM", "--sigterm_effect"),
                                       ("SIGHUP", "--sighup_effect"),
                                       ("SIGINT", "--sigint_effect")])
@pytest.mark.slow
def test_none_effect_is_ignored(sig, flag, workdir):
    run = Train(workdir, flag, "none")
    run.wait_for("Iteration 100,")
    os.kill(run.p.pid, getattr(signal, sig))
    at = run.wait_for("Iteration 200,")
    assert _snapshots(workdir) == []
    os.kill(run.p.pid, signal.SIGINT if sig != "SIGINT" else signal.SIGTERM)
    rc, err = run.finish()
    assert rc == 0 and at > 0, err[-2000:]
    assert len(_snapshots(workdir)) == 1


def test_bad_sigterm_effect_is_one_line(workdir):
    run = Train(workdir, "--sigterm_effect", "explode")
    rc, err = run.finish()
    assert rc == 1 and 'Invalid signal effect "explode" was specified for sigterm_effect' in err
