"""``caffepy export NET.prototxt --weights W.caffemodel -o model.onnx [--input NAME=N,C,H,W]
[--opset K] [--dynamic-batch] [--check]``.

Builds the TEST net, converts it layer by layer (caffepy.onnx) and writes the ONNX model
atomically. ``--check`` then runs the model in onnxruntime on random inputs and compares every
net output with caffepy's forward (<= 1e-4 relative, else exit 1). Needs the ``onnx`` extra
(``pip install 'caffepy[onnx]'``; onnxruntime for --check).
"""
import sys

NAME = "export"
HELP = "convert a net and its weights to ONNX (verified against onnxruntime with --check)"


def add_arguments(parser):
    parser.add_argument("net", help="net .prototxt (deploy / TEST net)")
    parser.add_argument("--weights", default=None,
                        help="trained .caffemodel (or .h5); without it the fillers' values")
    parser.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=N,C,H,W",
                        help="shape of an Input blob (repeatable)")
    parser.add_argument("--opset", type=int, default=None, help="ONNX opset (default 13)")
    parser.add_argument("--dynamic-batch", dest="dynamic_batch", action="store_true",
                        help="leave the batch axis of inputs and outputs symbolic ('N')")
    parser.add_argument("--check", action="store_true",
                        help="compare onnxruntime with caffepy's forward on random inputs")
    parser.add_argument("--phase", default="TEST", choices=("TRAIN", "TEST"), type=str.upper)


def _require(module, extra_hint):
    import importlib
    from ..onnx import ExportError
    try:
        importlib.import_module(module)
    except ImportError:
        raise ExportError("the '%s' package is not installed: pip install 'caffepy[onnx]'%s"
                          % (module, extra_hint))


def run(args):
    from .. import onnx as caffe_onnx
    from ..onnx.export import parse_input
    from ..onnx.check import DEFAULT_RTOL
    _require("onnx", "")
    if args.check:
        _require("onnxruntime", " (needed by --check)")
    inputs = dict(parse_input(t) for t in args.input)
    net = caffe_onnx.load_net(args.net, args.weights, inputs, args.phase)
    opset = caffe_onnx.DEFAULT_OPSET if args.opset is None else args.opset
    model = caffe_onnx.export(net, args.output, opset=opset, dynamic_batch=args.dynamic_batch)
    print("wrote %s: opset %d, %d nodes, %d initializers, inputs %s, outputs %s" % (
        args.output, opset, len(model.graph.node), len(model.graph.initializer),
        ", ".join(i.name for i in model.graph.input), ", ".join(o.name for o in model.graph.output)))
    if args.check:
        errors = caffe_onnx.check(net, model)
        for name, err in sorted(errors.items()):
            print("check %s: relative error %.2e (<= %g)" % (name, err, DEFAULT_RTOL))
    sys.stdout.flush()
    return 0
