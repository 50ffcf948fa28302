"""Worker threads read net files with the command's reading context: ``--define`` placeholders.

A worker of a group with K > 1 workers reads the solver's ``net:`` file itself (its share of the
batch is a NetParameter of its own); it must read it as the command did, with the ``--define``
values written in, and so train exactly as a net file with the values already in it.
"""
import numpy as np

import nets
from caffepy import dist
from caffepy.proto import caffe_pb2, io as proto_io, templates
from caffepy.solvers import get_solver

G, K, B = 1, 2, 4


def _solver_with_net_file(path):
    param = caffe_pb2.SolverParameter()
    proto_io.parse_text(nets.SOLVER % {"max_iter": 6, "type": "SGD"}, param)
    param.net = str(path)
    return get_solver(param, dtype=np.float64)


def _train(tmp_path, name, text, defines=()):
    path = tmp_path / (name + ".prototxt")
    path.write_text(text)
    x, y = nets.data(10 * G * B)
    with templates.defined(defines):
        solver = _solver_with_net_file(path)
        c = nets.cluster(nworker_groups=G, nworkers_per_group=K, nservers_per_group=1,
                         workspace=str(tmp_path / name))
        result = dist.train(solver, cluster=c, feeder=nets.feeder(x, y))
    return result, [p.data.copy() for p in solver.net.learnable_params]


def test_workers_read_the_net_file_with_the_commands_defines(tmp_path):
    literal = nets.MLP % {"batch": B}
    template = literal.replace("num_output: 3", "num_output: ${CLASSES}")
    assert template != literal
    want_result, want = _train(tmp_path, "literal", literal)
    got_result, got = _train(tmp_path, "template", template, [("CLASSES", "3")])
    assert got_result.step == want_result.step == 6
    assert len(got) == len(want) == 4
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
