"""The solver's test passes and output lines (Caffe's ``Solver::TestAll`` / ``Solver::Test``).

``test(i)`` shares the trained layers into test net ``i``, runs ``test_iter[i]`` forward passes,
and logs the mean of every element of every output (``Test net output #k: name = v``, with
``(* w = w*v loss)`` for loss outputs) and, with ``test_compute_loss``, the mean loss. A SIGINT /
SIGHUP action (signals.py) between batches snapshots or stops the pass as in Caffe.
"""
import numpy as np

from ..log import Progress, fmt, info
from . import debug
from .tensorboard import output_scalars

NONE, STOP, SNAPSHOT = "none", "stop", "snapshot"


class TestPasses(object):
    """Mixin of ``Solver``: needs ``param``, ``iter``, ``net``, ``test_nets``, ``test_scores``,
    ``requested_early_exit``, ``_requested_action()``, ``snapshot()`` and ``_board_write()``."""

    @staticmethod
    def _loss_weight(net, name):
        w = net.blob_loss_weights
        return w.get(name, 0.0) if hasattr(w, "get") else 0.0

    def _log_outputs(self, net, kind, tag, scores=None):
        """``    Train net output #k: name = v (* w = w*v loss)`` for every element of every output."""
        k = 0
        for name in net.outputs:
            weight = self._loss_weight(net, name)
            values = net.blobs[name].data.ravel() if scores is None else scores[name]
            for v in values:
                extra = " (* %s = %s loss)" % (fmt(weight), fmt(weight * v)) if weight else ""
                info(tag, "    %s net output #%d: %s = %s%s" % (kind, k, name, fmt(v), extra))
                k += 1

    # -- testing -------------------------------------------------------------------------------
    def test_all(self):
        for i in range(len(self.test_nets)):
            if self.requested_early_exit:
                break
            self.test(i)

    def test(self, test_net_id=0):
        """Run test net ``test_net_id`` for its test_iter batches; log and return the mean outputs."""
        info("solver.cpp:347", "Iteration %d, Testing net (#%d)" % (self.iter, test_net_id))
        net = self.test_nets[test_net_id]
        net.share_trained_layers_with(self.net)
        n = self.param.test_iter[test_net_id]
        progress = Progress(n, "test #%d" % test_net_id, unit="batch")
        try:
            result = self._test_batches(net, n, progress)
        finally:
            progress.close()
        if result is None:
            info("solver.cpp:373", "Test interrupted.")
            return None
        loss, means = result
        if self.param.test_compute_loss:
            info("solver.cpp:377", "Test loss: %s" % fmt(loss / n if n else float("nan")))
        self.test_scores[test_net_id] = [x for name in net.outputs for x in means.get(name, [])]
        self._log_outputs(net, "Test", "solver.cpp:414", means)
        values = output_scalars("test/%d" % test_net_id,
                                [(name, means[name]) for name in net.outputs if name in means])
        if self.param.test_compute_loss:
            values["test/%d/test_loss" % test_net_id] = loss / n if n else float("nan")
        self._board_write(values, flush=True)
        return means

    def _test_batches(self, net, n, progress):
        """Forward ``n`` test batches; (summed loss, {output: mean}), or None when stopped."""
        sums, loss = None, 0.0
        for i in range(n):
            request = self._requested_action()
            while request != NONE:
                if request == SNAPSHOT:
                    self.snapshot()
                elif request == STOP:
                    self.requested_early_exit = True
                request = self._requested_action()
            if self.requested_early_exit:
                break
            if self.param.debug_info:
                iter_loss = debug.forward_only_debug(net)
            else:
                iter_loss = net.forward_prefilled()
            if self.param.test_compute_loss:
                loss += iter_loss
            values = {name: net.blobs[name].data.astype(np.float64).ravel() for name in net.outputs}
            sums = values if sums is None else {k: sums[k] + v for k, v in values.items()}
            progress.update(i + 1)
        if self.requested_early_exit:
            return None
        return loss, {k: v / n for k, v in (sums or {}).items()}
