"""``caffepy time --model M [--iterations 50] [--phase TRAIN|TEST] [--optimize]``: benchmark a model, as ``caffe time``.

One warm-up forward and backward, then ``--iterations`` timed passes layer by layer; logs each
iteration's forward-backward time, every layer's average forward and backward ms, and the
``Average Forward pass`` / ``Average Backward pass`` / ``Average Forward-Backward`` /
``Total Time`` lines. The net takes no input blobs beyond what its layers produce (Input layers
keep zeros), as in Caffe. ``--optimize`` times the TEST net in inference mode
(caffepy.infer; ``--engine auto|caffepy|onnxruntime|openvino``), forward only, one line per
executed step, after a line with the engine and the times of the candidates ``auto`` weighed;
``--weights`` loads weights first.
"""
import time as _time

from .. import common
from ..log import fmt, info
from ..errors import CaffeError
from . import _flags, _gpu

NAME = "time"
HELP = "benchmark model execution time"


def add_arguments(parser):
    _flags.add_model(parser)
    parser.add_argument("--phase", default="", help="network phase: TRAIN (default) or TEST")
    _flags.add_gpu(parser)
    _flags.add_net_state(parser)
    _flags.add_num_classes(parser, _flags.NEEDED)
    _flags.add_unknown_fields(parser)
    _flags.add_iterations(parser, "the number of timed iterations")
    _flags.add_optimize(parser)
    parser.add_argument("--weights", default="", help="weights to load first (',' for several)")
    _flags.add_log(parser)


def _sync():
    """Wait for queued GPU work so that wall-clock times are real (no-op on the CPU)."""
    if common.mode() != common.GPU:
        return
    try:
        from .. import gpu
    except ImportError:
        return
    sync = getattr(gpu, "synchronize", None)
    if sync is not None:
        sync()


def _now():
    _sync()
    return _time.perf_counter()


def run(args):
    with _flags.unknown_fields(args):
        return _run(args)


def _run(args):
    from ..proto import caffe_pb2
    _flags.setup_logging(args)
    if not args.model:
        raise CaffeError("Need a model definition to time (--model)")
    if args.phase not in ("", "TRAIN", "TEST"):
        raise CaffeError('phase must be "TRAIN" or "TEST" (got "%s")' % args.phase)
    if args.optimize and args.phase == "TRAIN":
        raise CaffeError("--optimize times the TEST phase (forward only); drop --phase TRAIN")
    engine = _flags.optimize_engine(args)
    phase = caffe_pb2.TEST if args.phase == "TEST" or args.optimize else caffe_pb2.TRAIN
    _gpu.single_device(args)
    net = _flags.load_net(args, phase)
    for w in filter(None, args.weights.split(",")):
        net.copy_from(w)
    n = _flags.iterations(args)
    if n < 1:
        raise CaffeError("--iterations must be >= 1 (got %d)" % n)
    if args.optimize:
        return _time_optimized(net, n, engine)
    info("caffe.cpp:365", "Performing Forward")
    info("caffe.cpp:367", "Initial loss: %s" % fmt(net.forward_prefilled()))
    info("caffe.cpp:368", "Performing Backward")
    net.backward_from_to()
    layers, names = net.layers, net._layer_names
    fwd, bwd = [0.0] * len(layers), [0.0] * len(layers)
    forward_total = backward_total = 0.0
    info("caffe.cpp:378", "*** Benchmark begins ***")
    info("caffe.cpp:379", "Testing for %d iterations." % n)
    t_total = _now()
    for j in range(n):
        t_iter = _now()
        for i, layer in enumerate(layers):
            t = _now()
            layer.forward(net.bottom_vecs[i], net.top_vecs[i])
            fwd[i] += _now() - t
        t_back = _now()
        forward_total += t_back - t_iter
        for i in range(len(layers) - 1, -1, -1):
            if not net.layer_need_backward[i]:
                continue
            t = _now()
            layers[i].backward(net.top_vecs[i], net.bottom_need_backward[i], net.bottom_vecs[i])
            bwd[i] += _now() - t
        end = _now()
        backward_total += end - t_back
        info("caffe.cpp:401", "Iteration: %d forward-backward time: %s ms."
                 % (j + 1, fmt((end - t_iter) * 1e3)))
    total = _now() - t_total
    info("caffe.cpp:406", "Average time per layer: ")
    for i, name in enumerate(names):
        info("caffe.cpp:409", "%10s\tforward: %s ms." % (name, fmt(fwd[i] * 1e3 / n)))
        info("caffe.cpp:412", "%10s\tbackward: %s ms." % (name, fmt(bwd[i] * 1e3 / n)))
    info("caffe.cpp:417", "Average Forward pass: %s ms." % fmt(forward_total * 1e3 / n))
    info("caffe.cpp:419", "Average Backward pass: %s ms." % fmt(backward_total * 1e3 / n))
    info("caffe.cpp:421", "Average Forward-Backward: %s ms." % fmt(total * 1e3 / n))
    info("caffe.cpp:423", "Total Time: %s ms." % fmt(total * 1e3))
    info("caffe.cpp:424", "*** Benchmark ends ***")
    return 0


def _time_optimized(net, n, engine=None):
    """Forward-only timing of the optimized plan: one line per step (caffepy's engine: a layer
    with the layers folded into it; onnxruntime's: an onnxruntime part, named by its first and
    last layer, or a caffepy layer between parts), in the same format as the exact table."""
    plan = net.optimize(engine=engine)
    info("caffe.cpp:365", "Performing Forward (optimize mode: %d layers run as %d steps, engine %s)"
         % (len(net.layers), len(plan.steps), plan.engine))
    if plan.choice is not None:
        from ..infer.engine import describe
        info("caffe.cpp:365", "Engine %s chosen of: %s" % (plan.engine, describe(plan.choice)))
    else:
        info("caffe.cpp:365", "Engine %s (named, or the only one here): no other candidate timed"
             % plan.engine)
    info("caffe.cpp:367", "Initial loss: %s" % fmt(net.forward_prefilled()))
    fwd = [0.0] * len(plan.steps)
    forward_total = 0.0
    info("caffe.cpp:378", "*** Benchmark begins ***")
    info("caffe.cpp:379", "Testing for %d iterations." % n)
    t_total = _now()
    for j in range(n):
        t_iter = _now()
        for i, st in enumerate(plan.steps):
            t = _now()
            st.run()
            fwd[i] += _now() - t
        end = _now()
        forward_total += end - t_iter
        info("caffe.cpp:401", "Iteration: %d forward time: %s ms." % (j + 1, fmt((end - t_iter) * 1e3)))
    total = _now() - t_total
    info("caffe.cpp:406", "Average time per layer: ")
    for i, st in enumerate(plan.steps):
        info("caffe.cpp:409", "%10s\tforward: %s ms." % (st.name, fmt(fwd[i] * 1e3 / n)))
    info("caffe.cpp:417", "Average Forward pass: %s ms." % fmt(forward_total * 1e3 / n))
    info("caffe.cpp:423", "Total Time: %s ms." % fmt(total * 1e3))
    info("caffe.cpp:424", "*** Benchmark ends ***")
    return 0
