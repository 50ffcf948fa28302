"""``caffepy upgrade_net_proto_binary IN OUT``: Caffe's tool of the same name (see :mod:`.upgrade`)."""
from . import upgrade

NAME = "upgrade_net_proto_binary"
HELP = "upgrade a net (V0/V1 layers, input_dim, old BatchNorm) to the current format, written as binary"


def add_arguments(parser):
    upgrade.add_arguments(parser, "net (.prototxt or .caffemodel)")


def run(args):
    return upgrade.run_net(args, binary=True)
