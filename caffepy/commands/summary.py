"""``caffepy summary NET.prototxt [--input NAME=N,C,H,W ...] [--phase TRAIN|TEST]``.

A solver file stands for the net it builds in that phase (caffepy.proto.solver_nets).
Prints one line per layer (type, top shapes, parameter count, forward FLOPs, memory) and the
totals; data layers are replaced by Input layers of their declared shape (see caffepy.zoo.summary).
A size the file leaves open is searched for (caffepy.zoo.input_search) and printed in one line
before the table; ``--input`` gives it instead. ``--weights`` adds the shapes of a .caffemodel's
blobs to the checks.

A layer caffepy cannot build (a fork's type no plug-in gives) has its shapes carried by a rule of
caffepy.zoo.shape_rules (its type marked ``~`` and the rule in a footnote), or is listed with '?'
tops, as is every layer that depends on them, and a WARNING names what a plug-in must supply;
the command still exits 0. ``--strict``: such a layer is an error.

A DIGITS classification network's InnerProduct layers without num_output take ``--num-classes N``,
else a stand-in count named in one WARNING, strict or not (caffepy.proto.digits).
"""
from . import _flags
from ..proto.digits import STAND_IN

NAME = "summary"
HELP = "per-layer shapes, parameter counts, FLOPs and memory of a net"


def _input(text):
    name, sep, dims = text.partition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not sep or not name or not shape or any(d <= 0 for d in shape):
        raise ValueError("--input expects NAME=N,C,H,W with positive integers, got '%s'" % text)
    return name, shape


def add_arguments(parser):
    parser.add_argument("net", help="net .prototxt")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=N,C,H,W",
                        help="shape of an input blob (repeatable)")
    parser.add_argument("--weights", default=None, metavar="CAFFEMODEL",
                        help="trained weights whose blob shapes the net must match (they also "
                             "decide the input size when the file leaves it open)")
    parser.add_argument("--phase", default="TEST", choices=("TRAIN", "TEST"), type=str.upper)
    _flags.add_num_classes(parser, "a stand-in of %d, named in a WARNING" % STAND_IN)
    _flags.add_structure_strict(parser)
    parser.set_defaults(command_name="summary")


def run(args):
    from ..proto.harvest_policy import structure_only
    from ..zoo.data_shapes import is_data_layer       # shown as Input layers of their shapes
    with _flags.unknown_fields(args), structure_only(strict_fields=args.strict,
                                                     replaced=is_data_layer):
        return _run(args)


def _run(args):
    from .. import log
    from ..proto import caffe_pb2
    log.setup()     # warnings (e.g. a built-in standing in for a Python layer) reach stderr
    from ..zoo.summary import format_summary, summarize
    from ..proto.solver_nets import is_solver_file, solver_net
    inputs = dict(_input(t) for t in args.input)
    notes, inferred = [], []
    phase, source, filename = getattr(caffe_pb2, args.phase), args.net, None
    if is_solver_file(args.net):
        source, filename, what = solver_net(args.net, phase)
        log.info("summary.py", what)
    rows, total = summarize(source, inputs=inputs, phase=phase, notes=notes,
                            weights=getattr(args, "weights", None), inferred=inferred,
                            strict=args.strict, filename=filename, num_classes=args.num_classes)
    for note in notes:
        log.warning("summary.py", note)
    for line in inferred:
        print(line)
    print(format_summary(rows, total))
    return 0
