"""``caffepy upgrade_solver_proto_text IN OUT``: Caffe's tool of the same name (see :mod:`.upgrade`)."""
from . import upgrade

NAME = "upgrade_solver_proto_text"
HELP = "upgrade a solver (solver_type enum -> type string, inline nets) to the current format"


def add_arguments(parser):
    upgrade.add_arguments(parser, "solver .prototxt")


def run(args):
    return upgrade.run_solver(args)
