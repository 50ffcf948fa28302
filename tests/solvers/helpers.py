"""Shared pieces for solver tests: a small regression net, a solver builder, log capture."""
import io

import numpy as np

import caffepy
from caffepy.log import setup as setup_log, teardown as teardown_log
from caffepy.solvers import get_solver

N, D, K = 4, 3, 2

# InnerProduct (W: lr_mult 1.5, decay_mult 1; b: lr_mult 2, decay_mult 0.5) + EuclideanLoss:
#   loss = sum((x W^T + b - y)^2) / (2 N)
REGRESSION_NET = """
name: "regression"
layer { name: "x" type: "Input" top: "x" input_param { shape { dim: %d dim: %d } } }
layer { name: "y" type: "Input" top: "y" input_param { shape { dim: %d dim: %d } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip"
        param { lr_mult: 1.5 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0.5 }
        inner_product_param { num_output: %d weight_filler { type: "gaussian" std: 0.5 }
                              bias_filler { type: "constant" value: 0.1 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "y" top: "loss" }
""" % (N, D, N, K, K)

LR_MULT = (1.5, 2.0)
DECAY_MULT = (1.0, 0.5)


def batches(n, seed=11):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((n, N, D))
    ys = rng.standard_normal((n, N, K))
    return xs, ys


def solver_text(settings, net=REGRESSION_NET):
    return "net_param { %s }\n%s\nrandom_seed: 3\n" % (net, settings)


def make_solver(settings, dtype=np.float64, net=REGRESSION_NET):
    return get_solver(solver_text(settings, net), dtype=dtype)


def feed(solver, xs, ys, i):
    solver.net.blobs["x"].data[...] = xs[i]
    solver.net.blobs["y"].data[...] = ys[i]


def capture_log():
    """Route caffepy's glog lines to a StringIO; returns it."""
    stream = io.StringIO()
    setup_log(stream=stream, minloglevel=0)
    return stream


def reset_log():
    teardown_log()
    caffepy.set_mode_cpu()
