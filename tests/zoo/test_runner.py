"""The zoo sweeps' runner (tests/zoo_runner.py): a killed worker, the CPU-time limit."""
import os
import signal

import pytest

from tests.zoo_runner import cpu_limit, run_tasks


def _double_or_die(task):
    name, value = task
    if value == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    return name, value * 2, os.environ.get("OMP_NUM_THREADS")


def _died(task):
    return task[0], "died", None


@pytest.mark.parametrize("jobs", [1, 2])
def test_run_tasks_survives_a_killed_worker(jobs):
    tasks = [("a", 1), ("b", "die"), ("c", 3), ("d", 4)]
    if jobs == 1:
        tasks.remove(("b", "die"))
    seen = []
    done = run_tasks(_double_or_die, tasks, jobs, seen.append, _died)
    one = "1" if jobs > 1 else os.environ.get("OMP_NUM_THREADS")
    want = {"a": ("a", 2, one), "c": ("c", 6, one), "d": ("d", 8, one)}
    if jobs > 1:
        want["b"] = ("b", "died", None)
    assert done == want
    assert sorted(seen) == sorted(want.values())


def test_cpu_limit_raises_in_the_block_and_disarms_after():
    with pytest.raises(TimeoutError):
        with cpu_limit(0.2):
            while True:
                sum(range(1000))
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    with cpu_limit(0):
        assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
