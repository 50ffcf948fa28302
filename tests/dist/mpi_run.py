"""Run under mpiexec by the tests: the small MLP on a cluster; rank 0 saves the final params (.npz).

A rank that dies of a signal (SIGSEGV, SIGBUS, ...) writes its Python stack to stderr first
(faulthandler), so a crash inside an MPI library shows where caffepy was."""
import argparse
import faulthandler
import os
import sys
import time

import numpy as np

faulthandler.enable()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nets  # noqa: E402

from caffepy import dist  # noqa: E402
from caffepy.errors import CaffeError  # noqa: E402
from caffepy.proto import caffe_pb2  # noqa: E402
from caffepy.proto import io as proto_io  # noqa: E402
from caffepy.solvers import get_solver  # noqa: E402


def _count_crossing():
    """Count the GRAD / PARAM messages this rank sends to a rank on another host."""
    from caffepy.dist import mpi, transport as T
    counts = {"grad": 0, "param": 0}
    deliver = mpi.MpiEngine.deliver

    def counting(self, h, buffers):
        t = self.topology
        if h.kind in (T.GRAD, T.PARAM) and t.host_of(h.src) != t.host_of(h.dst):
            counts["grad" if h.kind == T.GRAD else "param"] += 1
        deliver(self, h, buffers)
    mpi.MpiEngine.deliver = counting
    return counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("--groups", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--separate", action="store_true")
    ap.add_argument("--max_iter", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--checkpoint_frequency", type=int, default=0)
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--consistency", default="BSP")
    ap.add_argument("--staleness", type=int, default=0)
    ap.add_argument("--slow_worker", type=int, default=-1,
                    help="this worker sleeps --slow_delay s in layer --slow_layer's forward every step")
    ap.add_argument("--slow_layer", type=int, default=0, help="0: the data layer, -1: the last")
    ap.add_argument("--slow_delay", type=float, default=0.01)
    ap.add_argument("--wait_free", type=int, default=1)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--engine", default="mpi")
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--hidden", type=int, default=7)
    ap.add_argument("--solver_extra", default="", help="more SolverParameter text")
    ap.add_argument("--net", default="mlp", choices=["mlp", "embed"],
                    help="embed: test_sparse's Embed net (sharded table, SFB on its InnerProduct)")
    ap.add_argument("--sfb_mode", default="AUTO", choices=["AUTO", "ALWAYS", "NEVER"])
    ap.add_argument("--count_crossing", action="store_true",
                    help="every rank prints CROSSING: the GRAD / PARAM messages it sent to other hosts")
    ap.add_argument("--signals", action="store_true",
                    help="SIGTERM / SIGINT stop the job with a checkpoint, as under caffepy train")
    a = ap.parse_args()
    from caffepy import log
    log.setup()
    W = a.groups * a.workers
    extra = "checkpoint_frequency: %d %s" % (a.checkpoint_frequency, a.solver_extra)
    if a.net == "embed":
        import test_sparse
        x, y = test_sparse.embed_data(10 * W * a.batch // a.workers)
        param = test_sparse.solver_param(test_sparse.EMBED_NET, a.batch, a.max_iter)
        proto_io.parse_text(extra, param)
    else:
        x, y = nets.data(10 * W * a.batch // a.workers)
        param = nets.solver_param(a.batch, a.max_iter, extra=extra)
        param.net_param.layer[1].inner_product_param.num_output = a.hidden
    solver = get_solver(param, dtype=np.float64)
    cluster = nets.cluster(nworker_groups=a.groups, nworkers_per_group=a.workers,
                           nservers_per_group=a.servers, server_worker_separate=a.separate,
                           workspace=a.workspace, consistency=a.consistency, engine=a.engine,
                           timeout=a.timeout, staleness=a.staleness, wait_free=bool(a.wait_free),
                           sfb_mode=caffe_pb2.ClusterParameter.SFBMode.Value(a.sfb_mode))
    crossing = _count_crossing() if a.count_crossing else None

    def feed(w, nworkers, net):
        nets.feeder(x, y)(w, nworkers, net)
        net.layers[0].pos = (solver.iter * net.layers[0].batch_size) % net.layers[0].n
        if a.sleep:
            run = net.forward_backward
            net.forward_backward = lambda: (time.sleep(a.sleep), run())[1]
        if w == a.slow_worker:
            layer = net.layers[a.slow_layer]
            forward = layer.forward
            layer.forward = lambda bottom, top: (time.sleep(a.slow_delay), forward(bottom, top))[1]
    try:
        if a.signals:
            from caffepy.solvers.signals import SignalHandler
            with SignalHandler() as handler:
                solver.set_action_function(handler.action)
                result = dist.train(solver, cluster=cluster, resume=a.resume, feeder=feed)
        else:
            result = dist.train(solver, cluster=cluster, resume=a.resume, feeder=feed)
    except CaffeError as e:
        sys.stderr.write("ERROR: %s\n" % e)     # one write: ranks' lines interleave whole
        return 1
    if crossing is not None:
        print("CROSSING grad=%d param=%d" % (crossing["grad"], crossing["param"]), flush=True)
    if result is not None:
        if a.out:
            np.savez(a.out, *[p.data for p in solver.net.learnable_params])
        print("RESULT step=%d bytes=%d messages=%d seconds=%.3f" % (
            result.step, result.bytes_sent, result.messages, result.seconds))
        for w, r in sorted(result.reports.items()):
            print("WORKER %d compute=%s wait=%s steps=%s stale=%s" % (w, r["compute"], r["wait"],
                                                                     r["steps"], r["stale"]))
        print("STALENESS %d" % result.max_staleness)
    return 0


if __name__ == "__main__":
    sys.exit(main())
