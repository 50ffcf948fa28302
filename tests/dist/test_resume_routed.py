"""Resume with routed params: SFB weights (stepped by every worker on its replica, checkpointed by
the workers with their solver history) and sharded Embed tables (rows on the servers, checkpointed
as shards) continue bit-identically after an interruption, in BSP with Adam (which has history)."""
import numpy as np
import pytest

from caffepy import dist
from caffepy.dist import checkpoint
from caffepy.proto import caffe_pb2
from caffepy.solvers import get_solver
from test_sfb import WIDE_NET, wide_data
from test_sparse import EMBED_NET, embed_data, solver_param

G, K = 2, 2


def _run(workspace, net_text, data, batch, max_iter, resume=False, **fields):
    x, y = data
    param = solver_param(net_text, K * batch, max_iter, "Adam")
    param.checkpoint_frequency = 5
    solver = get_solver(param, dtype=np.float64)
    c = caffe_pb2.ClusterParameter(nworker_groups=G, nworkers_per_group=K, nservers_per_group=2,
                                   workspace=str(workspace), wait_free=True, **fields)

    def feed(w, n, net):                 # each worker continues where the interrupted run was
        net.layers[0].reset(x[w::n], y[w::n])
        net.layers[0].pos = solver.iter * net.layers[0].batch_size % net.layers[0].n
    result = dist.train(solver, cluster=c, resume=resume, feeder=feed)
    return solver, result


CASES = {
    "sfb": (WIDE_NET, wide_data(10 * G * K * 2), 2,
            dict(sfb_mode=caffe_pb2.ClusterParameter.ALWAYS)),
    "sharded": (EMBED_NET, embed_data(10 * G * K * 4), 4,
                dict(sharded_table=["embed"])),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_resume_is_bit_identical(tmp_path, case):
    net_text, data, batch, fields = CASES[case]
    full, r_full = _run(tmp_path / "full", net_text, data, batch, 20, **fields)
    _run(tmp_path / "cut", net_text, data, batch, 10, **fields)
    assert checkpoint.latest_complete(str(tmp_path / "cut"))[0] == 10
    resumed, r = _run(tmp_path / "cut", net_text, data, batch, 20, resume=True, **fields)
    assert r.step == 20 and resumed.iter == 20
    if case == "sharded":
        assert sorted(r.table_shards) == [0, 1]          # the table came back as shards
    for a, b in zip(full.net.learnable_params, resumed.net.learnable_params):
        np.testing.assert_array_equal(a.data, b.data)
    # the solver history travelled too: Adam's moments equal after the resumed steps
    assert len(full.history) == len(resumed.history) > 0
    for a, b in zip(full.history, resumed.history):
        np.testing.assert_array_equal(a, b)
