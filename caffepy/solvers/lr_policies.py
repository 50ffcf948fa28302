"""Learning-rate policies (Caffe's ``SGDSolver::GetLearningRate``), a table of small functions.

With ``it`` the current iteration (the number of updates done so far) and the SolverParameter fields
``base_lr``, ``gamma``, ``power``, ``stepsize``, ``stepvalue``, ``max_iter``:

============  ==========================================================================
fixed         ``base_lr``
step          ``base_lr * gamma ^ floor(it / stepsize)``            (sets current_step)
exp           ``base_lr * gamma ^ it``
inv           ``base_lr * (1 + gamma * it) ^ (-power)``
multistep     ``base_lr * gamma ^ current_step``; current_step advances by one when
              ``it >= stepvalue[current_step]`` (at most one step per call, as Caffe)
poly          ``base_lr * (1 - it / max_iter) ^ power``
sigmoid       ``base_lr / (1 + exp(-gamma * (it - stepsize)))``
============  ==========================================================================

Each entry is ``(rate_fn, check_fn)``. :func:`validate` runs the policy's check when the solver file
is loaded, so a bad setting fails at load with a one-line :class:`~caffepy.errors.SolverError`, never
in the middle of training. ``rate_fn(param, it, state)`` returns the rate; ``state`` is the solver
(it carries ``current_step``, saved in the .solverstate).
"""
import math

from ..log import info
from ..errors import SolverError


def _need(cond, policy, msg):
    if not cond:
        raise SolverError("lr_policy '%s': %s" % (policy, msg))


def _check_gamma(p, policy):
    _need(p.gamma >= 0, policy, "gamma must be >= 0 (got %g)" % p.gamma)


def _fixed(p, it, state):
    return p.base_lr


def _step(p, it, state):
    state.current_step = it // p.stepsize
    return p.base_lr * math.pow(p.gamma, state.current_step)


def _check_step(p):
    _need(p.stepsize > 0, "step", "stepsize must be > 0 (got %d)" % p.stepsize)
    _check_gamma(p, "step")


def _exp(p, it, state):
    return p.base_lr * math.pow(p.gamma, it)


def _inv(p, it, state):
    return p.base_lr * math.pow(1.0 + p.gamma * it, -p.power)


def _multistep(p, it, state):
    if state.current_step < len(p.stepvalue) and it >= p.stepvalue[state.current_step]:
        state.current_step += 1
        info("sgd_solver.cpp:61", "MultiStep Status: Iteration %d, step = %d"
                 % (it, state.current_step))
    return p.base_lr * math.pow(p.gamma, state.current_step)


def _check_multistep(p):
    _check_gamma(p, "multistep")


def _poly(p, it, state):
    return p.base_lr * math.pow(1.0 - float(it) / float(p.max_iter), p.power)


def _check_poly(p):
    _need(p.max_iter > 0, "poly", "max_iter must be > 0 (got %d)" % p.max_iter)


def _sigmoid(p, it, state):
    return p.base_lr * (1.0 / (1.0 + math.exp(-p.gamma * (float(it) - float(p.stepsize)))))


def _check_sigmoid(p):
    _check_gamma(p, "sigmoid")
    _need(p.stepsize > 0, "sigmoid", "stepsize must be > 0 (got %d)" % p.stepsize)


POLICIES = {
    "fixed": (_fixed, lambda p: None),
    "step": (_step, _check_step),
    "exp": (_exp, lambda p: _check_gamma(p, "exp")),
    "inv": (_inv, lambda p: _check_gamma(p, "inv")),
    "multistep": (_multistep, _check_multistep),
    "poly": (_poly, _check_poly),
    "sigmoid": (_sigmoid, _check_sigmoid),
}


def validate(param):
    """Check ``param.lr_policy`` and the fields it uses; raise SolverError if anything is wrong."""
    policy = param.lr_policy
    if policy not in POLICIES:
        what = "no lr_policy given" if not policy else "unknown lr_policy '%s'" % policy
        raise SolverError("%s; known policies: %s" % (what, ", ".join(sorted(POLICIES))))
    POLICIES[policy][1](param)


class LrState(object):
    """The ``state`` of a rate function outside a solver (the parameter servers, the SFB replicas):
    just ``current_step``."""

    def __init__(self, current_step=0):
        self.current_step = current_step


def learning_rate(param, it, state):
    """The rate for iteration ``it`` (``state.current_step`` may be advanced, as in Caffe)."""
    return POLICIES[param.lr_policy][0](param, it, state)
