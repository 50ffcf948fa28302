"""Long self-contained jobs of the suite, run beside the other tests.

Most tests keep one core busy; on a two-core machine the other idles for most of the session. A
test whose work is one long chain of child processes (the README's main job: LeNet trained to
99%) declares that chain here with :func:`job`. When pytest has collected the session
(``pytest_collection_finish`` in conftest.py) and such a test is selected, its chain starts in the
background; chains run one at a time, each with one thread (``OMP_NUM_THREADS=1`` and the other
thread variables) and held to one CPU (:func:`one_core`), so the background never holds more than
one core. The test itself, when its turn comes, waits for its chain (:func:`chain_result`, or
:func:`chain_json` for a chain that writes its results as JSON) and checks what it produced as
before. A chain whose test is not selected never starts; one still running when the session ends
is killed with its process group. :func:`tree_env` is the environment of a chain that runs this
tree's code.

A chain is a list of commands, each ``(argv, stdout file or None)``, run in ``cwd`` with ``env``; it
stops at the first command that fails. :func:`result` returns ``Done(returncode, seconds, cwd)``.
The tests that have a chain run last (:func:`last`, from ``pytest_collection_modifyitems``), so
the foreground runs everything else while the chains run; the session's summary ends with each
chain's time (:func:`report`).
"""
import collections
import json
import os
import signal
import subprocess
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
Chain = collections.namedtuple("Chain", "commands cwd env")
Done = collections.namedtuple("Done", "returncode seconds cwd")

ONE_THREAD = {"OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1", "BLIS_NUM_THREADS": "1"}


def key(item):
    """A test's name here: its file's name and the test's (``test_e2e_lenet.py::test_...``),
    the same whatever directory pytest runs from."""
    return "%s::%s" % (os.path.basename(str(item.fspath)), item.name)


class Runner(object):
    """Chains registered by test name, run one at a time on a background thread."""

    def __init__(self):
        self.makers = {}        # test name -> make(tmp dir) -> Chain or None
        self.queue, self.done = [], {}
        self.proc = self.thread = None
        self.stopping = False
        self.cond = threading.Condition()

    def job(self, name):
        """Register ``make(tmp_dir) -> Chain`` as the chain of the test ``name`` (its
        :func:`key`); ``make`` returns None to leave the test to itself (its data is absent)."""
        def register(make):
            self.makers[name] = make
            return make
        return register

    def start(self, names, tmp_root):
        """Start the chains of the tests ``names`` (in that order) on one background thread."""
        if self.thread is not None:
            raise RuntimeError("background chains already started")
        for name in names:
            make = self.makers.get(name)
            if make is None:
                continue
            cwd = os.path.join(tmp_root, "chain-%d" % len(self.queue))
            os.makedirs(cwd, exist_ok=True)
            chain = make(cwd)
            if chain is not None:
                self.queue.append((name, chain))
        if self.queue:
            self.thread = threading.Thread(target=self._run_all, name="background-chains",
                                           daemon=True)
            self.thread.start()

    def started(self, name):
        return any(n == name for n, _ in self.queue)

    def last(self, items, key_fn):
        """``items`` with the tests that have a chain moved to the end, each group in its order:
        a test that waits for its chain waits least when every other test has run first."""
        own = [it for it in items if key_fn(it) in self.makers]
        return [it for it in items if key_fn(it) not in self.makers] + own

    def report(self):
        """One line per chain: its test, how it ended and how long it ran (or that it runs)."""
        with self.cond:
            lines = []
            for name, _ in self.queue:
                d = self.done.get(name)
                lines.append("background chain of %s: %s" % (
                    name, "still running" if d is None else
                    "exit %d after %.0f s" % (d.returncode, d.seconds)))
            return lines

    def _run_all(self):
        for name, chain in self.queue:
            t0, rc = time.time(), 0
            env = dict(chain.env, **ONE_THREAD)
            for argv, out in chain.commands:
                rc = self._run_one(argv, out, chain.cwd, env)
                if rc != 0:
                    break
            with self.cond:
                self.done[name] = Done(rc, time.time() - t0, chain.cwd)
                self.cond.notify_all()

    def _run_one(self, argv, out, cwd, env):
        with self.cond:
            if self.stopping:
                return -signal.SIGKILL
        f = open(out, "w") if out else subprocess.DEVNULL
        try:
            with self.cond:
                self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=f,
                                             stderr=subprocess.STDOUT, start_new_session=True)
                one_core(self.proc.pid)
            return self.proc.wait()
        finally:
            if out:
                f.close()
            with self.cond:
                self.proc = None

    def result(self, name, timeout):
        """Wait (at most ``timeout`` seconds) for the chain of ``name``; its Done."""
        deadline = time.time() + timeout
        with self.cond:
            while name not in self.done:
                left = deadline - time.time()
                if left <= 0:
                    raise TimeoutError("background chain of %s still running after %d s"
                                       % (name, timeout))
                self.cond.wait(min(left, 5.0))
            return self.done[name]

    def stop(self):
        """Kill what still runs and wait for the thread (the end of the session)."""
        with self.cond:
            self.stopping = True
            proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        if self.thread is not None:
            self.thread.join(timeout=30)


def one_core(pid):
    """Hold process ``pid`` to one CPU (the last this process may use), and with it the threads
    and processes it starts (they inherit it): a chain whose own threads run numpy side by side
    (the distributed MNIST runs) would otherwise take more than the core the foreground leaves.
    Called right after the process starts, before its Python has started any thread. Nothing on
    a one-CPU machine or where the OS has no affinity call."""
    if not hasattr(os, "sched_setaffinity"):
        return
    try:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) > 1:
            os.sched_setaffinity(pid, {cpus[-1]})
    except OSError:                 # the process has already ended
        pass


def chain_result(name, tmp_dir, timeout):
    """The Done of the chain of test ``name``: the session's when it started it, else (the test
    called on its own) the chain run now in ``tmp_dir`` by a runner of its own."""
    if runner.started(name):
        return runner.result(name, timeout)
    own = Runner()
    own.job(name)(runner.makers[name])
    own.start([name], str(tmp_dir))
    return own.result(name, timeout)


def chain_json(name, tmp_dir, timeout, log, result):
    """(Done, the JSON in the chain's ``result`` file) of the chain of test ``name``
    (:func:`chain_result`), after asserting that it exited 0 (the message: the end of its ``log``
    file, both named relative to the chain's directory)."""
    done = chain_result(name, tmp_dir, timeout)
    path = os.path.join(done.cwd, log)
    text = open(path).read() if os.path.exists(path) else ""
    assert done.returncode == 0, text[-3000:]
    with open(os.path.join(done.cwd, result)) as f:
        return done, json.load(f)


def tree_env(**extra):
    """os.environ with this tree first on PYTHONPATH, and ``extra``: a chain's child imports
    this checkout's caffepy and tests, whatever is installed."""
    path = [ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path), **extra)


#: The session's runner (conftest.py starts and stops it).
runner = Runner()
job, start, started, result, stop, last, report = (
    runner.job, runner.start, runner.started, runner.result, runner.stop, runner.last,
    runner.report)
