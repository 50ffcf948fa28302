"""BVLC Caffe's own solver trajectories (../shared/caffe-reference/solvers) reproduced step by step.

Seven cases (SGD multistep + momentum, SGD poly + L1 + clipping, Nesterov, AdaGrad, RMSProp,
AdaDelta with iter_size 2, Adam with inv) on a small conv net, 12 steps each, float32.
"""
import os

import numpy as np
import pytest

from caffepy.solvers import get_solver

from ..conftest import shared_path

CASES = ["adadelta_itersize2", "adagrad_fixed", "adam_inv", "nesterov_exp", "rmsprop_step",
         "sgd_multistep_momentum", "sgd_poly_l1_clip"]


@pytest.mark.parametrize("case", CASES)
def test_bvlc_trajectory(case, monkeypatch):
    folder = shared_path("caffe-reference", "solvers")
    monkeypatch.chdir(folder)  # the solver files name net.prototxt relative to the cwd, as in Caffe
    batches = np.load("batches.npz")
    expected = np.load(case + ".trajectory.npz")
    solver = get_solver(case + ".solver.prototxt")
    solver.net.copy_from(case + ".init.caffemodel")
    for i in range(12):
        solver.net.blobs["data"].data[...] = batches["data"][i]
        solver.net.blobs["label"].data[...] = batches["label"][i]
        solver.step(1)
        for name, blobs in solver.net.params.items():
            for j, blob in enumerate(blobs):
                want = expected["step%02d:%s:%d" % (i + 1, name, j)]
                scale = np.abs(want).max()
                err = np.abs(blob.data - want).max() / scale
                assert err < 1e-5, "%s step %d %s:%d relative error %g" % (case, i + 1, name, j, err)
    assert solver.iter == 12
    assert not os.path.exists(case + ".solver_iter_12.caffemodel")
