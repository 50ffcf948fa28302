"""The distributed LeNet example files (models/lenet/lenet_dist_solver.prototxt, cluster_ssp.prototxt)
say what the README claims: 4 ASYNC groups of one worker and 2 servers (so `mpiexec -n 4`), SSP with
staleness 2 through --cluster, and the solver settings tests/dist/test_mnist.py measured (its
example length, 1500 steps per group, where the test itself runs 1000)."""
import os

from caffepy.dist.topology import Topology, load_cluster
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.solvers.params import load_solver_param
from test_mnist import EXAMPLE_STEPS, SOLVER

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LENET = os.path.join(ROOT, "models", "lenet")


def test_dist_solver_and_cluster_files():
    param = load_solver_param(os.path.join(LENET, "lenet_dist_solver.prototxt"))
    cluster = load_cluster(param)
    assert (cluster.nworker_groups, cluster.nworkers_per_group, cluster.nservers_per_group) == (4, 1, 2)
    assert cluster.consistency == caffe_pb2.ClusterParameter.ASYNC and not cluster.server_worker_separate
    topo = Topology(cluster, [500, 20, 25000, 50, 400000, 500, 5000, 10])   # LeNet's param counts
    assert topo.n_processes == 4                                            # mpiexec -n 4
    want = caffe_pb2.SolverParameter()
    proto_io.parse_text(SOLVER % EXAMPLE_STEPS, want)  # the settings tests/dist/test_mnist.py measured
    for f in ("base_lr", "momentum", "weight_decay", "lr_policy", "gamma", "power", "max_iter"):
        assert getattr(param, f) == getattr(want, f), f
    assert param.net == "models/lenet/lenet_train_test.prototxt"
    assert os.path.exists(os.path.join(ROOT, param.net))
    ssp = load_cluster(param, os.path.join(LENET, "cluster_ssp.prototxt"))
    assert ssp.consistency == caffe_pb2.ClusterParameter.SSP and ssp.staleness == 2 and ssp.nworker_groups == 4


def test_mpi_launchers_are_recognised(monkeypatch):
    from caffepy.dist import trainer
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "SLURM_STEP_NUM_TASKS"):
        monkeypatch.delenv(var, raising=False)
    assert not trainer._under_mpi()
    for env in ({"PMI_SIZE": "4"}, {"OMPI_COMM_WORLD_SIZE": "2"},
                {"PMIX_RANK": "0", "SLURM_STEP_NUM_TASKS": "4"}):
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.setenv(k, v)
            assert trainer._under_mpi(), env
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "4")      # an sbatch script or one-task step
    assert not trainer._under_mpi()
    monkeypatch.setenv("PMI_SIZE", "1")
    assert not trainer._under_mpi()
