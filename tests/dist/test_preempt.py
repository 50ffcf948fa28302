"""SIGTERM (a batch scheduler's notice before preemption) to a distributed ``caffepy train``: the
job checkpoints at one step boundary every worker agrees on, logs how to continue and exits 0;
``--resume`` then ends bit-identical to the uninterrupted run."""
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT, needs_mpi
import nets

MAX_ITER = 1200     # long enough that SIGTERM (sent at the first display, step 100) lands mid-run


def _files(tmp_path, name, **cluster):
    d = tmp_path / name
    d.mkdir()
    (d / "net.prototxt").write_text(nets.DUMMY)
    (d / "solver.prototxt").write_text(
        'net: "%s" base_lr: 0.05 momentum: 0.9 lr_policy: "step" gamma: 0.5 stepsize: 700 '
        'max_iter: %d random_seed: 5 display: 100 snapshot_after_train: false '
        'checkpoint_after: 1000000 checkpoint_frequency: 1000000\n' % (d / "net.prototxt", MAX_ITER))
    fields = dict(dict(nworker_groups=2, nworkers_per_group=2, nservers_per_group=2), **cluster)
    (d / "cluster.prototxt").write_text(
        " ".join("%s: %s" % kv for kv in fields.items()) + ' workspace: "%s/"\n' % (d / "ws"))
    return d


def _cmd(d, *extra):
    return [sys.executable, "-m", "caffepy", "train", "--solver", str(d / "solver.prototxt"),
            "--cluster", str(d / "cluster.prototxt")] + list(extra)


def _env():
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("CAFFEPY_DEBUG", None)
    return env


class Job(object):
    def __init__(self, cmd):
        self.p = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.p.stderr), daemon=True)
        self.reader.start()

    def wait_for(self, pattern, timeout=120):
        end = time.time() + timeout
        while time.time() < end:
            if any(re.search(pattern, line) for line in list(self.lines)):
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        self.p.kill()
        raise AssertionError("no %r: %s" % (pattern, "".join(self.lines)[-2000:]))

    def finish(self, timeout=180):
        rc = self.p.wait(timeout)
        self.reader.join(5)
        return rc, "".join(self.lines)


def _final_params(d):
    from caffepy.dist import checkpoint
    ws = str(d / "ws")
    step, manifest = checkpoint.latest_complete(ws, verify=True)
    params = checkpoint.full_params(ws, manifest, "float32", "server")
    return step, {k: v[0].tobytes() + b"".join(h.tobytes() for h in v[1]) for k, v in params.items()}


def _check_stopped(rc, err, d):
    assert rc == 0, err[-2000:]
    assert "Traceback" not in err
    m = re.search(r"Stopped by SIGTERM at step (\d+): checkpoint (\S+); continue with --resume", err)
    assert m, err[-2000:]
    step = int(m.group(1))
    assert 0 < step < MAX_ITER and os.path.exists(m.group(2))
    assert m.group(2).endswith("step%d.manifest" % step)
    from caffepy.dist import checkpoint
    assert checkpoint.latest_complete(str(d / "ws"), verify=True)[0] == step
    return step


def _resume_equals_full(tmp_path, d, **cluster):
    full = _files(tmp_path, "full", **cluster)
    assert subprocess.run(_cmd(full), cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=300).returncode == 0
    p = subprocess.run(_cmd(d, "--resume"), cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    a, b = _final_params(full), _final_params(d)
    assert a[0] == b[0] == MAX_ITER
    assert a[1] == b[1]                       # values and history, bit for bit


@pytest.mark.slow
def test_sigterm_checkpoints_at_an_agreed_step_threads_engine(tmp_path):
    d = _files(tmp_path, "cut")
    job = Job(_cmd(d))
    job.wait_for(r"Iteration [1-9]\d* \(group")
    os.kill(job.p.pid, signal.SIGTERM)
    rc, err = job.finish()
    _check_stopped(rc, err, d)
    _resume_equals_full(tmp_path, d)


def _rank_pid(parent, rank, deadline=30):
    """The pid of ``caffepy train`` with PMI_RANK=rank under the mpiexec ``parent`` (not the
    watchdog rank 0 starts, nor another session's job)."""
    def descends(pid):
        while pid and pid != "1":
            if pid == str(parent):
                return True
            try:
                with open("/proc/%s/stat" % pid) as f:
                    pid = f.read().rsplit(")", 1)[1].split()[1]
            except OSError:
                return False
        return False
    end = time.time() + deadline
    while time.time() < end:
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or not descends(pid):
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cmd = f.read()
                with open("/proc/%s/environ" % pid, "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if b"caffepy\0train" in cmd and b"PMI_RANK=%d" % rank in env and b"watchdog" not in cmd:
                return int(pid)
        time.sleep(0.2)
    raise AssertionError("no rank %d process found" % rank)


@needs_mpi
@pytest.mark.slow
def test_sigterm_to_one_rank_of_an_mpi_job(tmp_path):
    """mpiexec -n 2 (one worker group per rank): SIGTERM to rank 1 only; both ranks stop at the
    same step with one checkpoint, exit 0; --resume (mpiexec again) equals the full run."""
    cluster = dict(nworker_groups=2, nworkers_per_group=1, nservers_per_group=1)
    d = _files(tmp_path, "cut", **cluster)
    job = Job(["mpiexec", "-n", "2"] + _cmd(d))
    job.wait_for(r"Iteration [1-9]\d* \(group 1")
    os.kill(_rank_pid(job.p.pid, 1), signal.SIGTERM)
    rc, err = job.finish()
    step = _check_stopped(rc, err, d)
    assert "SIGTERM: every worker stops at step %d" % step in err
    full = _files(tmp_path, "full", **cluster)
    for args in (_cmd(full), _cmd(d, "--resume")):
        p = subprocess.run(["mpiexec", "-n", "2"] + args, cwd=ROOT, env=_env(),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
    a, b = _final_params(full), _final_params(d)
    assert a[0] == b[0] == MAX_ITER and a[1] == b[1]


def test_preempt_while_a_barrier_step_waits_stops_the_job(tmp_path, monkeypatch):
    """A stop signal that reaches the wait-free workers while they wait for a checkpoint step's
    params (before its barrier): each answers the next boundary it has not passed (the step after
    that barrier), so the job stops there with a final checkpoint rather than running on to
    max_iter. In-process, threads engine; the signal arrives through the solver's action function
    as ``caffepy train``'s SignalHandler delivers it."""
    import numpy as np
    from caffepy import dist
    from caffepy.dist import waitfree
    from caffepy.solvers import get_solver
    G, K, B, N = 2, 2, 4, 400
    seen, at_barrier = [], threading.Event()
    wait_all = waitfree.WaitFreeWorker._wait_all

    def watched(self, c):
        seen.append((c, self.clock))
        if c == 10:
            at_barrier.set()
            time.sleep(0.3)     # the signal watcher (0.1 s poll) sends PREEMPT meanwhile
        return wait_all(self, c)
    monkeypatch.setattr(waitfree.WaitFreeWorker, "_wait_all", watched)
    x, y = nets.data(N * G * B)
    solver = get_solver(nets.solver_param(B, N, extra="checkpoint_frequency: 5"), dtype=np.float64)
    solver._action_fn = lambda: "stop" if at_barrier.is_set() else None
    c = nets.cluster(nworker_groups=G, nworkers_per_group=K, nservers_per_group=2,
                     workspace=str(tmp_path / "ws"))
    result = dist.train(solver, cluster=c, feeder=nets.feeder(x, y),
                        comm=waitfree.CommOptions(wait_free=True))
    assert 10 < result.step <= 12, result.step
    # the stop's own final barrier comes before its step's clock; every other wait is in its step
    assert all(clock == step for step, clock in seen if step < result.step), seen
    from caffepy.dist import checkpoint
    assert checkpoint.latest_complete(str(tmp_path / "ws"), verify=True)[0] == result.step
