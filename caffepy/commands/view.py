"""``caffepy view NET.prototxt|net.json|WORKSPACE [-o net.html]``: look at a net in a browser.

Without ``-o`` the page is served on 127.0.0.1 at a free port (or ``--port``) until Ctrl-C and
the browser is opened (``--no-browser``: print the URL only); with ``-o`` one self-contained HTML
file is written (no network needed). The page (caffepy.view): the graph laid out top-down, layers
coloured by family, pan and zoom, a side panel per layer (fields, shapes, parameters, FLOPs,
memory, forks, why it does not build), search, collapsible blocks, the TRAIN / TEST switch, the
summary table, a distributed run's worker groups and server shards, and training curves from
``--log`` files or a workspace's ``*.log`` (the served page follows them as the run goes on).
"""
import os

from . import _flags
from .summary import _input
from ..errors import CaffeError

NAME = "view"
HELP = "look at a net in the browser: graph, layer details, summary table, training curves"


def add_arguments(parser):
    parser.add_argument("net", help="a net .prototxt, a caffepy net.json, or a training workspace "
                                    "folder (its visualization/net.json and *.log files)")
    parser.add_argument("--weights", default=None, metavar="CAFFEMODEL",
                        help="trained weights whose blob shapes the net must match")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=N,C,H,W",
                        help="shape of an input blob (repeatable)")
    parser.add_argument("--phase", default=None, choices=("TRAIN", "TEST"), type=str.upper,
                        help="the phase shown first (default TEST, TRAIN for a distributed run; "
                             "both are in the page)")
    parser.add_argument("--log", action="append", default=[], metavar="FILE",
                        help="a Caffe-format training log whose curves the page shows (repeatable)")
    parser.add_argument("-o", "--output", metavar="HTML", help="write the page here instead of serving it")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--no-browser", dest="browser", action="store_false",
                        help="do not open a browser (print the URL only)")
    _flags.add_structure_strict(parser)
    parser.set_defaults(command_name="view")


def build(args):
    """The page's document and the list of logs to read curves from."""
    from ..view import data
    path = args.net
    if not os.path.exists(path):
        raise CaffeError("%s: no such file or folder" % path)
    for log in args.log:
        if not os.path.exists(log):
            raise CaffeError("--log %s: no such file" % log)
    structure = os.path.isdir(path) or path.lower().endswith(".json")
    if structure and (args.input or args.weights):
        raise CaffeError("--input and --weights apply to a .prototxt; %s brings its own shapes" % path)
    logs = list(args.log)
    if os.path.isdir(path):
        doc = data.from_workspace(path)
        logs += data.workspace_logs(path)
    elif path.lower().endswith(".json"):
        doc = data.from_net_json(path)
    else:
        inputs = dict(_input(t) for t in args.input)
        doc = data.from_prototxt(path, inputs=inputs, weights=args.weights, phase=args.phase)
    if args.phase in doc["phases"]:
        doc["phase"] = args.phase
    return doc, logs


def run(args):
    from .. import log
    from ..proto.harvest_policy import structure_only
    from ..view.curves import read_curves
    from ..view.page import render_page
    log.setup()
    with _flags.unknown_fields(args), structure_only(strict_fields=args.strict):
        doc, logs = build(args)
    doc["curves"] = read_curves(logs)
    if args.output:
        from ..proto.io import atomic_write
        atomic_write(args.output, render_page(doc).encode("utf-8"))
        print("wrote %s" % args.output)
        return 0
    return serve(doc, logs, args.port, args.browser)


def serve(doc, logs, port=0, browser=True):
    from ..view.curves import Follow
    from ..view.page import render_page
    from ..view.server import ViewServer
    doc["poll"] = bool(logs)
    body = render_page(doc).encode("utf-8")
    server = ViewServer(lambda: body, Follow(logs) if logs else None, port)
    print("caffepy view: serving %s (Ctrl-C to stop)" % server.url, flush=True)
    if browser:
        import webbrowser
        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped")
    finally:
        server.server_close()
    return 0
