"""``caffepy test --model M --weights W [--iterations 50]``: score a model, as ``caffe test``.

Builds the TEST-phase net (``--level`` / ``--stage`` select layers), copies the weights, runs
``--iterations`` forward passes and logs every output per batch (``Batch i, accuracy = ...``),
the mean loss and the mean of every output. ``--optimize`` runs the net in inference mode
(``--engine``: caffepy.infer.engine).
"""
import numpy as np

from ..log import fmt, info
from ..errors import CaffeError
from . import _flags, _gpu

NAME = "test"
HELP = "score a model"


def add_arguments(parser):
    _flags.add_model(parser)
    parser.add_argument("--weights", default="", help="the trained weights (.caffemodel or .h5; ',' for several)")
    _flags.add_gpu(parser)
    _flags.add_net_state(parser)
    _flags.add_num_classes(parser, _flags.NEEDED)
    _flags.add_unknown_fields(parser)
    _flags.add_iterations(parser, "the number of batches to run")
    _flags.add_optimize(parser)
    _flags.add_log(parser)


def run(args):
    with _flags.unknown_fields(args):
        return _run(args)


def _run(args):
    from ..proto import caffe_pb2
    _flags.setup_logging(args)
    if not args.model:
        raise CaffeError("Need a model definition to score (--model)")
    if not args.weights:
        raise CaffeError("Need model weights to score (--weights)")
    engine = _flags.optimize_engine(args)
    _gpu.single_device(args)
    net = _flags.load_net(args, caffe_pb2.TEST)
    for w in args.weights.split(","):
        net.copy_from(w)
    if args.optimize:
        plan = net.optimize(engine=engine)
        info("caffe.cpp:290", "Optimize mode, engine %s" % plan.engine)
    n = _flags.iterations(args)
    info("caffe.cpp:290", "Running for %d iterations." % n)
    sums, loss = None, 0.0
    for i in range(n):
        loss += net.forward_prefilled()
        values = [(name, net.blobs[name].data.astype(np.float64).ravel()) for name in net.outputs]
        for name, vec in values:
            for v in vec:
                info("caffe.cpp:313", "Batch %d, %s = %s" % (i, name, fmt(v)))
        sums = values if sums is None else [(name, s + v) for (name, s), (_, v) in zip(sums, values)]
    loss /= max(n, 1)
    info("caffe.cpp:318", "Loss: %s" % fmt(loss))
    weights = net.blob_loss_weights
    for name, total in sums or []:
        w = weights.get(name, 0.0)
        for v in total / n:
            extra = " (* %s = %s loss)" % (fmt(w), fmt(w * v)) if w else ""
            info("caffe.cpp:330", "%s = %s%s" % (name, fmt(v), extra))
    return 0
