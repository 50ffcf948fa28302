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
