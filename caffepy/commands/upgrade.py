"""Shared body of Caffe's upgrade tools (``upgrade_net_proto_text``, ``upgrade_net_proto_binary``,
``upgrade_solver_proto_text``): read IN (text or binary, detected), bring it to the current format
with :mod:`caffepy.proto.upgrade`, write OUT atomically (text or binary, per tool).

This module defines no ``NAME``, so the CLI does not list it; each tool is a small module beside it.
As Caffe's tools do, OUT is written even when IN is already current (a one-line note says so).
The tools compute nothing, so fields and enum values caffepy's schema declares only because Caffe
forks define them (caffepy.proto.harvest_policy) are read as ``caffepy draw`` reads them, for the
structure, named in one WARNING, and written to OUT as they are (a fork's V1 type value becomes
that fork's type name).
"""
import sys

from ..proto import caffe_pb2, io, upgrade


def add_arguments(parser, what):
    parser.add_argument("input", metavar="IN", help="the %s to upgrade" % what)
    parser.add_argument("output", metavar="OUT", help="where to write the upgraded %s" % what)


def _report(needed, args):
    if needed:
        print("upgraded %s -> %s" % (args.input, args.output))
    else:
        sys.stderr.write("%s: already in the latest proto format; written to %s\n"
                         % (args.input, args.output))


def run_net(args, binary):
    """Upgrade a NetParameter file; write it as binary (``binary``) or text."""
    from ..proto.harvest_policy import structure_only
    with structure_only():
        net = io.read_message(args.input, caffe_pb2.NetParameter())
        needed = upgrade.net_needs_upgrade(net)
        upgrade.upgrade_net(net, filename=args.input)
    (io.write_binary if binary else io.write_text)(net, args.output)
    _report(needed, args)
    return 0


def run_solver(args):
    """Upgrade a SolverParameter file (solver_type enum → type string, inline nets) to text."""
    from ..proto.harvest_policy import structure_only
    with structure_only():
        solver = io.read_message(args.input, caffe_pb2.SolverParameter())
        needed = upgrade.solver_needs_upgrade(solver)
        upgrade.upgrade_solver(solver, filename=args.input)
    io.write_text(solver, args.output)
    _report(needed, args)
    return 0
