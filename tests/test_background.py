"""tests/background.py: chains run one at a time, stop at a failing command, report their return
code and directory, take one thread each, and are killed at the end of the session."""
import os
import sys
import time

import pytest

from tests import background


def _chain(cwd, *scripts):
    return background.Chain([([sys.executable, "-c", s], os.path.join(cwd, "out%d.txt" % i))
                             for i, s in enumerate(scripts)], cwd, dict(os.environ))


def test_chains_run_in_order_with_one_thread(tmp_path):
    r = background.Runner()
    r.job("a")(lambda cwd: _chain(cwd, "import os; print(os.environ['OMP_NUM_THREADS'])",
                                  "open('second', 'w').write('x')"))
    r.job("b")(lambda cwd: _chain(cwd, "import sys; sys.exit(3)", "open('never', 'w')"))
    r.job("c")(lambda cwd: None)                    # leaves its test alone
    r.start(["b", "a", "c", "unknown"], str(tmp_path))
    assert r.started("a") and r.started("b") and not r.started("c")
    a, b = r.result("a", 60), r.result("b", 60)
    r.stop()
    assert a.returncode == 0 and open(os.path.join(a.cwd, "out0.txt")).read().strip() == "1"
    assert os.path.exists(os.path.join(a.cwd, "second"))
    assert b.returncode == 3 and not os.path.exists(os.path.join(b.cwd, "never"))
    assert a.cwd != b.cwd


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity and two CPUs")
def test_a_chain_and_its_threads_keep_to_one_cpu(tmp_path):
    """A chain's process, a thread it starts and a child it starts each may run on one CPU."""
    script = ("import os, subprocess, sys, threading; seen = []; "
              "t = threading.Thread(target=lambda: seen.append(len(os.sched_getaffinity(0)))); "
              "t.start(); t.join(); "
              "child = subprocess.run([sys.executable, '-c', 'import os; "
              "print(len(os.sched_getaffinity(0)))'], capture_output=True, text=True).stdout; "
              "print(len(os.sched_getaffinity(0)), seen[0], child.strip())")
    r = background.Runner()
    r.job("a")(lambda cwd: _chain(cwd, script))
    r.start(["a"], str(tmp_path))
    a = r.result("a", 60)
    r.stop()
    assert a.returncode == 0
    assert open(os.path.join(a.cwd, "out0.txt")).read().split() == ["1", "1", "1"]
    assert len(os.sched_getaffinity(0)) >= 2        # this process keeps its CPUs


def test_stop_kills_the_running_chain(tmp_path):
    r = background.Runner()
    r.job("slow")(lambda cwd: _chain(cwd, "import time; time.sleep(60)", "open('after', 'w')"))
    r.start(["slow"], str(tmp_path))
    time.sleep(0.5)
    t0 = time.time()
    r.stop()
    done = r.result("slow", 10)
    assert time.time() - t0 < 10
    assert done.returncode != 0 and not os.path.exists(os.path.join(done.cwd, "after"))


def test_result_times_out(tmp_path):
    r = background.Runner()
    r.job("slow")(lambda cwd: _chain(cwd, "import time; time.sleep(30)"))
    r.start(["slow"], str(tmp_path))
    with pytest.raises(TimeoutError):
        r.result("slow", 0.5)
    r.stop()


def test_tests_with_a_chain_run_last_and_are_reported(tmp_path):
    r = background.Runner()
    r.job("lenet")(lambda cwd: _chain(cwd, "import sys; sys.exit(2)"))
    r.job("sweep")(lambda cwd: _chain(cwd, "pass"))
    items = ["a", "sweep", "b", "lenet", "c"]
    assert r.last(items, str) == ["a", "b", "c", "sweep", "lenet"]
    r.start(r.last(items, str), str(tmp_path))
    assert r.result("lenet", 60).returncode == 2
    r.stop()
    lines = r.report()
    assert len(lines) == 2 and lines[0].startswith("background chain of sweep: exit 0 after ")
    assert lines[1].startswith("background chain of lenet: exit 2 after ")


def test_a_test_called_on_its_own_runs_its_chain(tmp_path, monkeypatch):
    monkeypatch.setattr(background, "runner", background.Runner())
    background.runner.job("solo")(lambda cwd: _chain(cwd, "open('made', 'w')"))
    done = background.chain_result("solo", tmp_path, 60)     # the session started nothing
    assert done.returncode == 0 and os.path.exists(os.path.join(done.cwd, "made"))


def test_chain_json_and_tree_env(tmp_path, monkeypatch):
    """chain_json returns what the chain wrote and fails with its log's end when it failed; a
    tree_env child imports this tree's tests package first."""
    code = ("import json, sys, tests; print('log line'); "
            "json.dump({'root': tests.__file__}, open('r.json', 'w')); sys.exit(%d)")
    for name, rc in (("ok", 0), ("bad", 4)):
        background.runner.job(name)(lambda cwd, rc=rc: background.Chain(
            [([sys.executable, "-c", code % rc], os.path.join(cwd, "c.log"))], cwd,
            background.tree_env(EXTRA="1")))
    monkeypatch.setattr(background.runner, "started", lambda name: False)
    done, data = background.chain_json("ok", tmp_path / "a", 60, "c.log", "r.json")
    assert done.returncode == 0
    assert data["root"].startswith(os.path.join(background.ROOT, "tests"))
    with pytest.raises(AssertionError, match="log line"):
        background.chain_json("bad", tmp_path / "b", 60, "c.log", "r.json")
    for name in ("ok", "bad"):
        del background.runner.makers[name]
