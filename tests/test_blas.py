"""caffepy.math.blas: the BLAS thread budget for nets that compute at once (distributed workers)."""
import pytest

from caffepy.math import blas

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads():
    return [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]


def test_threads_per_gemm_splits_cores_and_never_drops_below_one():
    assert blas.threads_per_gemm(1, ncores=16) == 16
    assert blas.threads_per_gemm(4, ncores=16) == 4
    assert blas.threads_per_gemm(3, ncores=16) == 5
    assert blas.threads_per_gemm(4, ncores=2) == 1
    assert blas.threads_per_gemm(0, ncores=2) == 2


def test_budget_limits_inside_and_restores_after(monkeypatch):
    for var in blas.USER_VARS:
        monkeypatch.delenv(var, raising=False)
    before = _blas_threads()
    if not before:
        pytest.skip("numpy's BLAS is not visible to threadpoolctl")
    with blas.budget(64, ncores=2) as n:
        assert n == 1
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before


def test_budget_leaves_a_users_choice_alone(monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    before = _blas_threads()
    with blas.budget(64, ncores=2) as n:
        assert n is None
        assert _blas_threads() == before


def test_one_compute_thread_changes_nothing(monkeypatch):
    for var in blas.USER_VARS:
        monkeypatch.delenv(var, raising=False)
    before = _blas_threads()
    with blas.budget(1) as n:
        assert n is None
        assert _blas_threads() == before


@pytest.mark.parametrize("hosts,rank,workers,want", [(["a", "a", "b", "a"], 0, 1, 3),
                                                      (["a", "a", "b", "a"], 2, 1, 1),
                                                      (["a", "b"], 1, 2, 2),
                                                      (["a"], 0, 1, 1)])
def test_mpi_ranks_on_this_host_count_as_compute_threads(hosts, rank, workers, want):
    """The MPI engine learns every rank's host at start (processor names, allgathered): the ranks
    sharing this rank's host, each with its in-process workers, compute at once."""
    from types import SimpleNamespace

    from caffepy.dist.mpi import MpiEngine
    engine = SimpleNamespace(hosts=hosts, rank=rank)
    assert MpiEngine.host_compute_threads(engine, workers) == want


_NUMPY_FIRST = r"""
import os, sys
import numpy as np
from threadpoolctl import threadpool_info
openblas = [p for p in threadpool_info()
            if p["internal_api"] == "openblas" and p.get("threading_layer") == "pthreads"]
a = np.random.default_rng(0).standard_normal((300, 300)).astype(np.float32)
want = a.astype(np.float64) @ a.astype(np.float64)
a @ a                                    # OpenBLAS's threads run (and spin) before caffepy
threads = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
import caffepy
seen = [os.environ["OPENBLAS_THREAD_TIMEOUT"]]
test = 'name: "t" input: "x" input_shape { dim: 1 dim: 3 } layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" inner_product_param { num_output: 2 } }'
for phase in ("TEST", "TRAIN", "TEST"):     # inference spins; training is quiet and stays so
    caffepy.Net(test, phase=getattr(caffepy, phase))
    seen.append(os.environ["OPENBLAS_THREAD_TIMEOUT"])
    got = a @ a                          # the threads start again
    err = float(np.abs(got - want).max() / np.abs(want).max())
    assert err < 1e-5, err
print("OPENBLAS", len(openblas), "SEEN", ",".join(seen), "THREADS",
      threads == [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"])
"""


@pytest.mark.parametrize("user", [None, "10"])
def test_openblas_idle_threads_follow_the_regime_unless_the_user_chose(user):
    """``import numpy`` before ``import caffepy``: OpenBLAS's threads restart quiet at import,
    spinning for a TEST net, quiet for a TRAIN net, which stays; a timeout the user set is never
    changed. GEMMs after each restart are right and keep their thread count."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != blas.TIMEOUT_VAR}
    env["OPENBLAS_NUM_THREADS"] = "2"
    if user:
        env[blas.TIMEOUT_VAR] = user
    out = subprocess.run([sys.executable, "-c", _NUMPY_FIRST], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    words = out.stdout.split()
    got = dict(zip(words[::2], words[1::2]))
    q, s = blas.QUIET_TIMEOUT, blas.SPIN_TIMEOUT
    assert got["SEEN"] == (",".join([user] * 4) if user else ",".join([q, s, q, q]))
    assert got["THREADS"] == "True"


def test_the_regime_waits_for_a_single_thread(monkeypatch):
    """With other Python threads running (a GEMM may be in flight), nothing is restarted and
    the regime is not recorded, so a later single-threaded point applies it."""
    import threading
    monkeypatch.setitem(blas._state, "user", None)
    monkeypatch.setitem(blas._state, "regime", None)
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert blas.use_regime("infer") == [] and blas._state["regime"] is None
