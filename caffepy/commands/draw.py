"""``caffepy draw INPUT -o OUT``: draw a net (.prototxt or net.json) or dump its structure as JSON.

OUT's extension picks the format: .png, .svg, .pdf (need a Graphviz engine, see
caffepy.draw.render) or .dot (always works). ``--json PATH`` writes the net JSON (docs/netjson.md).
A solver file stands for the net it builds (caffepy.proto.solver_nets). ``--shapes`` builds the net
for its blob and parameter shapes; where it does not build here (its data set, mean file or Python
module missing) the shapes are those ``caffepy summary`` shows, after one WARNING. Without
``--rankdir`` deep nets are drawn top to bottom and shallow ones left to right. A DIGITS
classification network's InnerProduct layers without num_output take ``--num-classes N``, else a
stand-in count named in one WARNING (caffepy.proto.digits).
"""
import os

from . import _flags
from ..errors import CaffeError
from ..proto.digits import STAND_IN

NAME = "draw"
HELP = "draw a net (.prototxt or net.json) to .png/.svg/.pdf/.dot, or dump it as JSON"
DEEP = 16


def add_arguments(parser):
    parser.add_argument("input", help="a net .prototxt (or .caffemodel) or a caffepy net.json")
    parser.add_argument("-o", "--output", help="image to write: .png, .svg, .pdf or .dot")
    parser.add_argument("--json", metavar="PATH", help="also write the net-structure JSON here")
    parser.add_argument("--rankdir", type=str.upper, choices=["LR", "TB", "BT", "RL"],
                        help="layout direction (default: TB for nets deeper than %d layers, else LR)"
                        % DEEP)
    parser.add_argument("--phase", type=str.upper, choices=["TRAIN", "TEST", "ALL"], default="ALL",
                        help="draw only the layers of this phase (default ALL)")
    parser.add_argument("--display-lrm", "--display_lrm", dest="display_lrm", action="store_true",
                        help="show each layer's lr_mult / decay_mult")
    parser.add_argument("--group-by", "--group_by", dest="group_by", choices=["worker"],
                        help="one cluster per worker group (a distributed net.json)")
    parser.add_argument("--shapes", action="store_true",
                        help="build the net (for --phase, TEST when ALL) to show blob and param shapes")
    parser.add_argument("--no-edge-labels", dest="edge_labels", action="store_false",
                        help="do not write shapes on the edges")
    _flags.add_num_classes(parser, "a stand-in of %d, named in a WARNING" % STAND_IN)
    _flags.add_structure_strict(parser)
    parser.set_defaults(command_name="draw")


def _load(args):
    from .. import draw
    if args.input.lower().endswith(".json"):
        return draw.select_phase(draw.read_net_json(args.input), args.phase)
    if not os.path.exists(args.input):
        raise CaffeError("%s: no such file" % args.input)
    from ..proto import caffe_pb2, digits, io as proto_io
    from ..proto.solver_nets import is_solver_file, solver_net
    phase = caffe_pb2.TRAIN if args.phase == "TRAIN" else caffe_pb2.TEST
    source, filename = args.input, None
    if is_solver_file(args.input):
        from .. import log
        source, filename, what = solver_net(args.input, phase)
        log.info("draw.py", what)
    param = proto_io.read_net(source)
    named = filename or source                   # the file the net's error lines name
    digits.complete(param, args.num_classes, named, stand_in=True)
    if args.shapes:
        from ..net import Net
        try:
            return draw.net_json(Net(param, phase, filename=named))
        except CaffeError as e:
            net = _summarized(param, phase, named, args, e)
            return draw.net_json(param, phase=phase, net=net)
    return draw.net_json(param, phase=args.phase)


def _summarized(param, phase, filename, args, error):
    """The net ``caffepy summary`` builds for ``param`` (data layers as Inputs of their sizes,
    the sizes a file leaves open searched), for its shapes, where the net itself does not build
    here (``error``: a data set, a mean file or a Python module the machine lacks); one WARNING.
    ``error`` is raised where summary cannot build it either."""
    from .. import log
    from ..zoo.summary import summarize
    nets = []
    try:
        summarize(param, phase=phase, nets=nets, filename=filename, strict=args.strict,
                  num_classes=args.num_classes)
    except CaffeError:
        raise error from None
    log.warning("draw.py", "shapes as caffepy summary shows them (the net does not build here: "
                "%s)" % " ".join(str(error).split())[:300])
    return nets[0]


def run(args):
    from .. import draw
    from ..proto.io import atomic_write
    if not args.output and not args.json:
        raise CaffeError("nothing to do: give -o OUT (.png/.svg/.pdf/.dot) and/or --json PATH")
    fmt = None
    if args.output:
        fmt = os.path.splitext(args.output)[1].lower().lstrip(".")
        if fmt not in draw.FORMATS:
            raise CaffeError("%s: unknown output format '.%s' (use .png, .svg, .pdf or .dot)"
                             % (args.output, fmt))
    from .. import log
    from ..proto.harvest_policy import structure_only
    log.setup()                 # its WARNINGs reach stderr in glog format
    # unknown / fork-only fields: WARNINGs (errors with --strict)
    with _flags.unknown_fields(args), structure_only(strict_fields=args.strict):
        doc = _load(args)
    if args.json:
        atomic_write(args.json, draw.dumps(doc).encode("utf-8"))
        print("wrote %s" % args.json)
    if args.output:
        rankdir = args.rankdir or ("TB" if draw.graph_depth(doc) > DEEP else "LR")
        source = draw.to_dot(doc, rankdir=rankdir, display_lrm=args.display_lrm,
                             group_by=args.group_by, label_edges=args.edge_labels)
        atomic_write(args.output, draw.render_dot(source, fmt))
        print("wrote %s" % args.output)
    return 0
