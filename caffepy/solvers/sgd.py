"""Stochastic gradient descent as a template method (Caffe's ``SGDSolver``), and Nesterov.

``apply_update`` is, per iteration (``g`` a param's diff, ``w`` its data)::

    rate = lr_policy(iter)                                   (lr_policies.py)
    clip:        if ||g||_2 over all params > clip_gradients:  g *= clip_gradients / ||g||_2
    for each learnable param:
      normalize:   g /= iter_size                             (diffs accumulated over iter_size passes)
      regularize:  L2: g += weight_decay * decay_mult * w
                   L1: g += weight_decay * decay_mult * sign(w)
      compute:     the update rule turns g into the step, with local_rate = rate * lr_mult
    apply:       w -= g                                       (Net.update)

Subclasses override only :meth:`update_rule`, a static function on arrays (so a parameter server
can run the same rule on slices): ``update_rule(g, hist, local_rate, param, t)`` rewrites ``g`` in
place into the step and updates the history arrays ``hist`` (``t`` = iter + 1).

Structured Sparsity Learning's fields (per-param regularization_type, group lasso, connectivity
masks; :mod:`sparsity`) replace ``regularize`` by :meth:`Sparsity.regularize` and add the fork's
zerout after ``Net.update``, on the host in either mode.

SGD with momentum ``m``::      h = m * h + local_rate * g;   g = h
Nesterov::                     h' = m * h + local_rate * g;  g = (1 + m) * h' - m * h;  h = h'

SolverParameter fields: base_lr, lr_policy (+ gamma, power, stepsize, stepvalue, max_iter),
momentum (0), weight_decay (0), regularization_type ("L2"), clip_gradients (-1: off), iter_size (1).
"""
import numpy as np

from .. import common

from ..log import fmt, info
from . import lr_policies
from .sparsity import Sparsity
from .solver import Solver


class SGDSolver(Solver):
    type = "SGD"
    n_history = 1  # history blobs per learnable param (AdaDelta and Adam keep two)

    def pre_solve(self):
        params = self.net.learnable_params
        self.history = [np.zeros(p.shape, dtype=p.dtype) for _ in range(self.n_history) for p in params]
        self.lr = 0.0
        self.sparsity = Sparsity.for_solver(self)

    def _hist(self, pid):
        n = len(self.net.learnable_params)
        return [self.history[k * n + pid] for k in range(self.n_history)]

    # -- the template method ------------------------------------------------------------------
    def get_learning_rate(self):
        return lr_policies.learning_rate(self.param, self.iter, self)

    def apply_update(self):
        ssl = getattr(self, "sparsity", None)
        if common.mode() == common.GPU and ssl is None:   # fused kernels (caffepy.gpu.solvers)
            from ..gpu import solvers as gpu_solvers
            return gpu_solvers.apply_update(self)
        rate = self.get_learning_rate()
        self.lr = rate
        if self.param.display and self.iter % self.param.display == 0:
            info("sgd_solver.cpp:112", "Iteration %d, lr = %s" % (self.iter, fmt(rate)))
        self.clip_gradients()
        for pid in range(len(self.net.learnable_params)):
            self.normalize(pid)
            self.regularize(pid)
            self.compute_update_value(pid, rate)
        self.net.update()
        if ssl is not None:
            ssl.after_update()

    def clip_gradients(self):
        clip = self.param.clip_gradients
        if clip < 0:
            return
        params = self.net.learnable_params
        sumsq = sum(float(np.dot(p.diff.ravel(), p.diff.ravel())) for p in params)
        l2norm = np.sqrt(sumsq)
        if l2norm > clip:
            scale = clip / l2norm
            info("sgd_solver.cpp:93", "Gradient clipping: scaling down gradients (L2 norm %s > %s) "
                     "by scale factor %s" % (fmt(l2norm), fmt(clip), fmt(scale)))
            for p in params:
                p.diff[...] *= p.dtype.type(scale)

    def normalize(self, pid):
        if self.param.iter_size == 1:
            return
        p = self.net.learnable_params[pid]
        p.diff[...] *= p.dtype.type(1.0) / p.dtype.type(self.param.iter_size)

    def regularize(self, pid):
        if getattr(self, "sparsity", None) is not None:
            return self.sparsity.regularize(pid)
        p = self.net.learnable_params[pid]
        dt = p.dtype.type
        local_decay = dt(self.param.weight_decay) * dt(self.net.params_weight_decay[pid])
        if not local_decay:
            return
        if self.param.regularization_type == "L2":
            p.diff[...] += local_decay * p.data
        else:
            p.diff[...] += local_decay * np.sign(p.data)

    def compute_update_value(self, pid, rate):
        p = self.net.learnable_params[pid]
        dt = p.dtype.type
        local_rate = dt(rate) * dt(self.net.params_lr[pid])
        self.update_rule(p.diff, self._hist(pid), local_rate, self.param, self.iter + 1)

    @staticmethod
    def update_rule(g, hist, local_rate, param, t):
        h = hist[0]
        m = g.dtype.type(param.momentum)
        h *= m
        h += local_rate * g
        g[...] = h

    # -- state ---------------------------------------------------------------------------------
    def state_history(self):
        if common.mode() == common.GPU and getattr(self, "_gpu_history", None):
            from ..gpu import solvers as gpu_solvers
            gpu_solvers.sync_history(self)
        return self.history

    def restore_history(self, history, source):
        from ..errors import SolverError
        info("sgd_solver.cpp:318", "SGDSolver: restoring history")
        if len(history) != len(self.history):
            raise SolverError("%s: Incorrect length of history blobs (%d, expected %d for a %s solver "
                              "on this net)" % (source, len(history), len(self.history), self.type))
        for i, (mine, saved) in enumerate(zip(self.history, history)):
            if mine.size != saved.size:
                raise SolverError("%s: history blob %d has %d values, expected %d"
                                  % (source, i, saved.size, mine.size))
            mine[...] = saved.reshape(mine.shape)
        self._gpu_history = None   # device mirrors (if any) are rebuilt from the restored host copy


class NesterovSolver(SGDSolver):
    type = "Nesterov"

    @staticmethod
    def update_rule(g, hist, local_rate, param, t):
        h = hist[0]
        m = g.dtype.type(param.momentum)
        previous = h.copy()
        h *= m
        h += local_rate * g
        g[...] = (m + g.dtype.type(1)) * h - m * previous
