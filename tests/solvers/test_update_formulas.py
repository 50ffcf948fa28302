"""Each solver against Caffe's documented update formulas, written out here in float64.

From identical weights and data, 20 iterations of the solver must give the weights the formulas
give (1e-6 relative), covering every lr policy, L1/L2 weight decay with decay_mult, lr_mult,
clip_gradients and iter_size > 1.
"""
import math

import numpy as np
import pytest

from .helpers import DECAY_MULT, LR_MULT, batches, feed, make_solver

ITERS = 20


def grads(W, b, x, y):
    r = x @ W.T + b - y
    return [r.T @ x / len(x), r.sum(0) / len(x)]


def rate(s, it):
    if s["lr_policy"] == "fixed":
        return s["base_lr"]
    if s["lr_policy"] == "step":
        return s["base_lr"] * s["gamma"] ** (it // s["stepsize"])
    if s["lr_policy"] == "exp":
        return s["base_lr"] * s["gamma"] ** it
    if s["lr_policy"] == "inv":
        return s["base_lr"] * (1 + s["gamma"] * it) ** (-s["power"])
    if s["lr_policy"] == "multistep":
        return s["base_lr"] * s["gamma"] ** sum(it >= v for v in s["stepvalue"])
    if s["lr_policy"] == "poly":
        return s["base_lr"] * (1 - it / s["max_iter"]) ** s["power"]
    if s["lr_policy"] == "sigmoid":
        return s["base_lr"] / (1 + math.exp(-s["gamma"] * (it - s["stepsize"])))
    raise AssertionError(s["lr_policy"])


def step(kind, s, g, h, lr, t):
    """Return the step (w -= step) and update the history list h in place."""
    m, delta = s.get("momentum", 0.0), s.get("delta", 1e-8)
    if kind == "SGD":
        h[0] = m * h[0] + lr * g
        return h[0]
    if kind == "Nesterov":
        prev = h[0]
        h[0] = m * prev + lr * g
        return (1 + m) * h[0] - m * prev
    if kind == "AdaGrad":
        h[0] = h[0] + g * g
        return lr * g / (np.sqrt(h[0]) + delta)
    if kind == "RMSProp":
        d = s["rms_decay"]
        h[0] = d * h[0] + (1 - d) * g * g
        return lr * g / (np.sqrt(h[0]) + delta)
    if kind == "AdaDelta":
        h[0] = m * h[0] + (1 - m) * g * g
        u = g * np.sqrt((h[1] + delta) / (h[0] + delta))
        h[1] = m * h[1] + (1 - m) * u * u
        return lr * u
    if kind == "Adam":
        b1, b2 = m, s["momentum2"]
        h[0] = b1 * h[0] + (1 - b1) * g
        h[1] = b2 * h[1] + (1 - b2) * g * g
        return lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t) * h[0] / (np.sqrt(h[1]) + delta)
    raise AssertionError(kind)


def as_proto_floats(s):
    """SolverParameter's float fields hold float32 values: the reference uses the same numbers."""
    return {k: float(np.float32(v)) if isinstance(v, float) else v for k, v in s.items()}


def reference(kind, s, W, b, xs, ys):
    s = as_proto_floats(s)
    params = [W.copy(), b.copy()]
    n = s.get("iter_size", 1)
    hist = [[np.zeros_like(p), np.zeros_like(p)] for p in params]
    wd, reg = s.get("weight_decay", 0.0), s.get("regularization_type", "L2")
    for it in range(ITERS):
        # iter_size passes over one batch accumulate; Caffe clips the sum, then divides by iter_size
        g = [n * gi for gi in grads(params[0], params[1], xs[it], ys[it])]
        clip = s.get("clip_gradients", -1)
        norm = math.sqrt(sum(float((gi * gi).sum()) for gi in g))
        if clip >= 0 and norm > clip:
            g = [gi * clip / norm for gi in g]
        g = [gi / n for gi in g]
        lr = rate(s, it)
        for i in range(2):
            decay = wd * DECAY_MULT[i]
            g[i] = g[i] + decay * (params[i] if reg == "L2" else np.sign(params[i]))
            params[i] = params[i] - step(kind, s, g[i], hist[i], lr * LR_MULT[i], it + 1)
    return params


CASES = {
    "sgd_step_l2": ("SGD", dict(base_lr=0.05, lr_policy="step", gamma=0.5, stepsize=7, momentum=0.9,
                                weight_decay=0.01)),
    "sgd_poly_l1_clip_itersize": ("SGD", dict(base_lr=0.2, lr_policy="poly", power=2.0, max_iter=20,
                                              weight_decay=0.02, regularization_type="L1",
                                              clip_gradients=0.3, iter_size=2, momentum=0.5)),
    "nesterov_exp": ("Nesterov", dict(base_lr=0.05, lr_policy="exp", gamma=0.95, momentum=0.8,
                                      weight_decay=0.001)),
    "adagrad_multistep": ("AdaGrad", dict(base_lr=0.1, lr_policy="multistep", gamma=0.3,
                                          stepvalue=[5, 12], delta=1e-6, weight_decay=0.005)),
    "rmsprop_inv_itersize": ("RMSProp", dict(base_lr=0.01, lr_policy="inv", gamma=0.1, power=0.75,
                                             rms_decay=0.95, delta=1e-6, iter_size=3)),
    "adadelta_fixed_l1": ("AdaDelta", dict(base_lr=1.0, lr_policy="fixed", momentum=0.95, delta=1e-6,
                                           weight_decay=0.01, regularization_type="L1")),
    "adam_sigmoid": ("Adam", dict(base_lr=0.02, lr_policy="sigmoid", gamma=0.3, stepsize=10,
                                  momentum=0.9, momentum2=0.999, delta=1e-8, weight_decay=0.002)),
}


def settings_text(kind, s):
    out = ['type: "%s"' % kind, "max_iter: %d" % s.get("max_iter", 100)]
    for k, v in s.items():
        if k == "max_iter":
            continue
        if isinstance(v, list):
            out += ["%s: %s" % (k, x) for x in v]
        elif isinstance(v, str):
            out.append('%s: "%s"' % (k, v))
        else:
            out.append("%s: %r" % (k, v))
    return "\n".join(out)


@pytest.mark.parametrize("case", sorted(CASES))
def test_solver_matches_formulas(case):
    kind, s = CASES[case]
    solver = make_solver(settings_text(kind, s))
    assert type(solver).type == kind
    W0 = solver.net.params["ip"][0].data.copy()
    b0 = solver.net.params["ip"][1].data.copy()
    xs, ys = batches(ITERS)
    for i in range(ITERS):
        feed(solver, xs, ys, i)
        solver.step(1)
    assert solver.iter == ITERS
    W, b = reference(kind, s, W0, b0, xs, ys)
    for got, want in ((solver.net.params["ip"][0].data, W), (solver.net.params["ip"][1].data, b)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    assert not np.allclose(W, W0)  # the weights did move


def test_clipping_actually_clips():
    kind, s = CASES["sgd_poly_l1_clip_itersize"]
    solver = make_solver(settings_text(kind, s))
    xs, ys = batches(1)
    feed(solver, xs, ys, 0)
    solver.net.clear_param_diffs()
    solver.net.forward_backward()
    norm = math.sqrt(sum(float((p.diff ** 2).sum()) for p in solver.net.learnable_params))
    assert norm > s["clip_gradients"]
