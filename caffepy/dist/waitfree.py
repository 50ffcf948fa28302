"""Wait-free backpropagation: push each layer's gradients as soon as its backward is done, and let
the next forward wait, layer by layer, only for the params it reads.

:class:`LayerParams` maps a net's layers to learnable params: ``reads[i]`` (the params layer i's
forward needs) and ``ready_after[i]`` (the params whose gradient is complete once layer i's
backward ran: the first layer, in net order, that computes a gradient for it; shared weights wait
for their last user in backward). Params no backward touches are pushed when backward ends.

:class:`GradientSender` is a thread per worker fed from ``net.on_backward_layer``: it sends
while the worker thread goes on with the layers below, so communication overlaps backward. A dense
push under BSP / ASYNC is only a header and a hand-over of the diff (no copy; the engine sends
without blocking), so the worker thread makes it itself, without the thread hop; the sender takes
the pushes that copy or compute (SSP's copies, SFB factors, table rows), except in a process
limited to one core, where a second thread could only take turns with backward: all inline there.

While it computes (forward and backward, not while it waits for params) the worker tells the
engine (:meth:`~caffepy.dist.transport.Engine.computing`): the MPI engine's threads then keep off
the rank's core instead of polling, and the worker asks for one cheap progress round
(:meth:`~caffepy.dist.transport.Engine.progress`) after each forward layer and each backward
layer's pushes, so gradients leave and parameters arrive during backward and forward without a
thread spinning beside the computation (the MPI engine makes those rounds only where the rank has
a core to spare; on one core its communication thread's sparse rounds do it alone).

:class:`WaitFreeWorker` is :class:`caffepy.dist.worker.Worker` with that step::

    for each pass of iter_size:
      for each layer i: [first pass: wait until reads[i] reached version c - start; zero their diffs]
                        forward layer i
      backward; on the last pass each layer's ready_after params are scaled by 1 / iter_size and
      handed to the sender as the layer finishes
    (no wait at the end of the step: the next step's forward waits layer by layer)

Diffs are zeroed only once the param's new version has arrived (in process, GRAD messages carry
the diff buffers themselves, read by the stub later). Under SSP a layer waits only while its
params' cached clock is below ``c - staleness`` (:meth:`Worker.wait_fresh`); pushes then carry
copies, and the sender is flushed before a diff is zeroed. Before a barrier, and at the end, the
worker waits for every param, as the plain worker does after each step.

Configuration (:class:`CommOptions`): ``wait_free`` (on by default) and the SFB / sharded-table
choices; read from the cluster's fields of the same names unless the trainer is given an options
object.
"""
import queue
import threading
import time

import numpy as np

from .. import common
from ..errors import SolverError
from ..solvers import debug
from .transport import affinity_cores as _cores
from .worker import Worker


class CommOptions(object):
    """Communication options of a distributed run (ClusterParameter's fields of the same names).

    ``sfb_mode``: AUTO / ALWAYS / NEVER; ``sfb_layers`` / ``dense_layers``: per-layer overrides;
    ``sparse_update``: EXACT / LAZY; ``sharded_tables``: Embed layer names (empty: every Embed
    layer); ``shard_tables``: False keeps every table dense. See :mod:`caffepy.dist.routing`.
    """

    def __init__(self, wait_free=True, sfb_mode="AUTO", sfb_layers=(), dense_layers=(),
                 sparse_update="EXACT", sharded_tables=(), shard_tables=True):
        self.wait_free = bool(wait_free)
        self.sfb_mode, self.sparse_update = sfb_mode.upper(), sparse_update.upper()
        self.sfb_layers, self.dense_layers = list(sfb_layers), list(dense_layers)
        self.sharded_tables, self.shard_tables = list(sharded_tables), bool(shard_tables)


def options(cluster=None, comm=None):
    """The options in force: ``comm`` if given, else the cluster's fields, else the defaults."""
    if comm is not None:
        return comm
    if cluster is None:
        return CommOptions()
    C = type(cluster)
    return CommOptions(cluster.wait_free, C.SFBMode.Name(cluster.sfb_mode), cluster.sfb_layer,
                       cluster.dense_layer, C.SparseUpdate.Name(cluster.sparse_update),
                       cluster.sharded_table, cluster.shard_tables)


class LayerParams(object):
    """Which params each layer's forward reads and after which layer's backward each is pushed."""

    def __init__(self, net):
        n_layers = len(net.layers)
        self.reads = [[] for _ in range(n_layers)]
        users = {}
        j = new = 0
        for li, layer in enumerate(net.layers):
            for k in range(len(layer.blobs)):
                owner = net.param_owners[j]
                p = owner if owner >= 0 else new
                new += owner < 0
                j += 1
                if p not in self.reads[li]:
                    self.reads[li].append(p)
                propagates = k < len(layer.param_propagate_down) and layer.param_propagate_down[k]
                if net.layer_need_backward[li] and propagates:
                    users.setdefault(p, []).append(li)
        self.n_params = new
        self.ready_after = [[] for _ in range(n_layers)]
        for p, lis in users.items():
            self.ready_after[min(lis)].append(p)
        pushed = {p for ps in self.ready_after for p in ps}
        self.leftover = [p for p in range(new) if p not in pushed]


class GradientSender(object):
    """A thread that runs ``send(item)`` for each item handed to :meth:`put`, in order."""

    def __init__(self, send, name="gradient-sender"):
        self.send = send
        self.queue = queue.Queue()
        self.error = None
        self.busy = 0.0
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def put(self, item):
        if self.error is not None:
            raise self.error
        self.queue.put(item)

    def _loop(self):
        while True:
            item = self.queue.get()
            try:
                if item is None:
                    common.release_gpu_thread()
                    return
                if self.error is None:
                    t0 = time.time()
                    self.send(item)
                    self.busy += time.time() - t0
            except BaseException as e:  # handed to the worker thread at its next put / flush
                self.error = e
            finally:
                self.queue.task_done()

    def flush(self):
        """Block until everything handed over has been sent."""
        self.queue.join()
        if self.error is not None:
            raise self.error

    def close(self):
        self.queue.put(None)
        self.thread.join(5.0)


class WaitFreeWorker(Worker):
    """A worker whose gradients leave layer by layer and whose forward waits layer by layer."""

    def __init__(self, *args, **kwargs):
        super(WaitFreeWorker, self).__init__(*args, **kwargs)
        self.layer_params = LayerParams(self.net)
        self.clock = 0
        self._last_pass = False
        self.sender = None
        # dense pushes of the plain worker: made inline (see the module's doc); every push where
        # the process has one core (a thread could not overlap it, only take turns with backward)
        self.inline_push = (not self.ssp and type(self).push is Worker.push) or _cores() == 1

    def run(self, stopping):
        self.sender = GradientSender(lambda pc: self.push(*pc),
                                     "gradient-sender %d" % self.ep.id)
        self.net.on_backward_layer.append(self._on_backward_layer)
        self.receive_in_place(True)
        try:
            self._run()
        finally:
            self.receive_in_place(False)
            self.net.on_backward_layer.remove(self._on_backward_layer)
            self.sender.close()

    def _run(self):
        if self.send_init:
            self._push_init()
        for c in range(self.start, self.param.max_iter):
            if c == self.stop_at:                       # preempted: a final barrier at c
                self._wait_all(c)
                self.barrier(c, final=True)
                return
            self.clock = c      # (before the wait: a PREEMPT meanwhile answers c + 1, not c)
            if c > self.start and self.barrier_step(c):
                self._wait_all(c)
                self.barrier(c, final=False)
            t0, w0 = time.time(), self.t_wait
            self.set_computing(True)
            try:
                loss = self.compute(c)
            finally:
                self.set_computing(False)
            self.t_compute += time.time() - t0 - (self.t_wait - w0)
            self.steps += 1
            if self.progress and c % self.param.display == 0:
                self.progress.log("waitfree.py", c, loss)
        self._wait_all(self.param.max_iter)
        self.barrier(self.param.max_iter, final=True)

    def _wait_all(self, c):
        t0 = time.time()
        self.sender.flush()
        self.wait_params(c - self.start, c)
        self.t_wait += time.time() - t0

    def compute(self, c):
        net, n = self.net, self.param.iter_size
        version, progress = c - self.start, self.ep.engine.progress
        loss = 0.0
        for k in range(n):
            self._last_pass = k == n - 1
            for i in range(len(net.layers)):
                if k == 0 and self.layer_params.reads[i]:
                    self._wait_layer(i, version, c)
                loss += net.forward_from_to(i, i)
                progress()
            net.backward_from_to()
        for p in self.layer_params.leftover:
            self._scale(p, n)
            self._push(p, c)
        loss /= n
        if not np.isfinite(loss):
            raise SolverError(debug.nonfinite_message(net, c, loss))
        return loss

    def _wait_layer(self, i, version, c):
        reads = self.layer_params.reads[i]
        if self.ssp:            # Bösen's cache: wait only for params staler than the bound
            t0 = time.time()
            with self.waiting():
                self.sender.flush()     # the last step's pushes took their copies of these diffs
            self.wait_fresh(c, reads)
            self.t_wait += time.time() - t0
        elif any(self.version[p] < version for p in reads):
            t0 = time.time()
            self.wait_params(version, c, reads)
            self.t_wait += time.time() - t0
        for p in reads:
            self.net.learnable_params[p].diff[...] = 0

    def _scale(self, p, n):
        if n > 1:
            d = self.net.learnable_params[p].diff
            d[...] *= d.dtype.type(1.0) / d.dtype.type(n)

    def _on_backward_layer(self, li):
        if self._last_pass:
            for p in self.layer_params.ready_after[li]:
                self._scale(p, self.param.iter_size)
                self._push(p, self.clock)
        self.ep.engine.progress()

    def _push(self, p, c):
        if self.inline_push:
            self.push(p, c)
        else:
            self.sender.put((p, c))


def worker_class(opts):
    """The worker class for these options."""
    return WaitFreeWorker if opts.wait_free else Worker
