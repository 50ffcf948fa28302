"""The runner behind the model-zoo sweeps (tests/test_modelzoo.py, tests/test_onnx_zoo.py).

Each net file becomes one task per distinct prepared net (``distinct_tasks``); a task runs under
a CPU-time limit (``cpu_limit``) in this process, or on spawned worker processes that use one BLAS
thread each (``run_tasks``). A worker that dies (killed for memory) does not end the sweep: the
tasks it may have been running run again one at a time, and one that kills its worker alone gets
the outcome ``died(task)`` gives.
"""
import contextlib
import hashlib
import os
import signal
import sys

ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
MAX_TASKS_PER_CHILD = 40        # a fresh worker now and then keeps memory from piling up


def distinct_tasks(paths, prepare_fn, reason_fn, *extra):
    """One task ``(path, serialised prepared nets, *extra)`` per distinct prepared net, or
    ``(path, reason_fn(error), *extra)`` for a file that cannot be prepared; and
    {path: path of the identical net that runs}."""
    tasks, first, same_as = [], {}, {}
    for path in paths:
        try:
            nets = prepare_fn(path)
        except Exception as e:
            tasks.append((path, reason_fn(e)) + extra)
            continue
        blobs = tuple(n.SerializeToString(deterministic=True) for n in nets)
        digest = hashlib.sha1(b"".join(blobs)).hexdigest()
        if digest in first:
            same_as[path] = first[digest]
            continue
        first[digest] = path
        tasks.append((path, blobs) + extra)
    return tasks, same_as


def sweep_chain(work, module, args, name):
    """A sweep of ../shared/modelzoo as a background chain (tests/background.py): ``python -m
    module -j 1 *args --json work/name.json`` logging to ``work/name.log``, this tree first on
    PYTHONPATH; None when the model zoo is absent (the test skips)."""
    from tests import background
    from tests.conftest import SHARED
    root = os.path.join(SHARED, "modelzoo")
    if not os.path.isdir(root):
        return None
    env = background.tree_env(CAFFEPY_ZOO=root)
    argv = [sys.executable, "-m", module, "-j", "1"] + list(args) + [
        "--json", os.path.join(work, name + ".json")]
    return background.Chain([(argv, os.path.join(work, name + ".log"))], work, env)


def _over_cpu_limit(signum, frame):
    raise TimeoutError("over the CPU-time limit")


@contextlib.contextmanager
def cpu_limit(seconds):
    """Raise TimeoutError inside the block once it has used ``seconds`` of CPU (0: no limit)."""
    if seconds:
        signal.signal(signal.SIGPROF, _over_cpu_limit)
        signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        if seconds:
            signal.setitimer(signal.ITIMER_PROF, 0)


@contextlib.contextmanager
def _one_thread_env():
    """ONE_THREAD in os.environ inside the block (read by numpy's BLAS as spawned workers start)."""
    saved = {k: os.environ.get(k) for k in ONE_THREAD}
    os.environ.update(ONE_THREAD)
    try:
        yield
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def run_tasks(work, tasks, jobs, on_done=None, died=None):
    """{task[0]: work(task)} for every task, in this process when ``jobs`` <= 1, else on ``jobs``
    spawned workers (at most ``jobs`` tasks in flight; ``work`` must be a module-level function).
    ``on_done(result)`` is called as each finishes; ``died(task)`` is the result of a task that
    kills its worker when run alone."""
    done = {}

    def record(out):
        done[out[0]] = out
        if on_done:
            on_done(out)

    if jobs <= 1:
        for task in tasks:
            record(work(task))
        return done
    with _one_thread_env():
        _run_pool(work, list(tasks), jobs, record, died)
    return done


def _run_pool(work, queue, jobs, record, died):
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool
    extra = {"max_tasks_per_child": MAX_TASKS_PER_CHILD} if sys.version_info >= (3, 11) else {}
    ctx = multiprocessing.get_context("spawn")
    suspects = []
    while queue or suspects:
        if suspects:
            task = suspects.pop(0)
            with ProcessPoolExecutor(1, mp_context=ctx) as pool:
                try:
                    record(pool.submit(work, task).result())
                except BrokenProcessPool:
                    record(died(task))
            continue
        with ProcessPoolExecutor(jobs, mp_context=ctx, **extra) as pool:
            running = {}
            while (queue or running) and not suspects:
                while queue and len(running) < jobs:
                    task = queue.pop(0)
                    running[pool.submit(work, task)] = task
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in finished:
                    task = running.pop(f)
                    try:
                        record(f.result())
                    except BrokenProcessPool:
                        suspects.append(task)
            suspects.extend(running.values())
