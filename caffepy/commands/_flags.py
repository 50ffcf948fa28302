"""Flags shared by train / test / time (Caffe's gflags of tools/caffe.cpp, same names and defaults)."""
import argparse

from ..log import setup as setup_log


def add_model(parser):
    parser.add_argument("--model", default="", help="the model definition protocol buffer text file")


def add_gpu(parser):
    parser.add_argument("--gpu", default="",
                        help="run in GPU mode on the given device ids separated by ',' ('all': every "
                             "device)")


def add_net_state(parser):
    parser.add_argument("--level", type=int, default=0, help="network level (NetState.level)")
    parser.add_argument("--stage", default="",
                        help="network stages separated by ',' (not to be confused with phase)")


def _class_count(text):
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n <= 0:
        raise argparse.ArgumentTypeError("expected a positive integer, got '%s'" % text)
    return n


def _define(text):
    from ..errors import CaffeError
    from ..proto.templates import parse_define
    try:
        return parse_define(text)
    except CaffeError as e:
        raise argparse.ArgumentTypeError(str(e))


def add_num_classes(parser, without):
    """--num-classes: the class count of a DIGITS classification network (caffepy.proto.digits);
    ``without`` says what the command does when it is not given. Also --define NAME=VALUE, a
    template placeholder's value (caffepy.proto.templates)."""
    parser.add_argument("--define", action="append", type=_define, default=[],
                        metavar="NAME=VALUE",
                        help="a template placeholder's value (${NAME}, $NAME, {{NAME}} in the "
                             "net text), written in before the file is read (repeatable)")
    parser.add_argument("--num-classes", "--num_classes", dest="num_classes", type=_class_count,
                        default=None, metavar="N",
                        help="the dataset's class count, the num_output of a DIGITS "
                             "classification network's InnerProduct layers that leave it unset "
                             "(without it: %s)" % without)


NEEDED = "an error naming the layers"


def add_iterations(parser, what):
    parser.add_argument("--iterations", type=int, default=None, help="%s (default 50)" % what)


def add_log(parser):
    parser.add_argument("--log", metavar="FILE",
                        help="also write the glog-format log lines to FILE (for parse_log / plot)")


def stages(args):
    return [s for s in args.stage.split(",") if s]


def iterations(args):
    return 50 if args.iterations is None else args.iterations


def add_optimize(parser):
    parser.add_argument("--optimize", action="store_true",
                        help="inference mode (caffepy.infer): TEST phase, forward only, run by "
                             "caffepy's own steps, onnxruntime or openvino (--engine)")
    parser.add_argument("--engine", choices=("auto", "caffepy", "onnxruntime", "openvino"),
                        default=None,
                        help="inference mode's engine (with --optimize): auto (default, or "
                             "CAFFEPY_INFER_ENGINE): of caffepy's steps and onnxruntime / openvino "
                             "where installed, the fastest here whose outputs match the exact path "
                             "(the choice cached per net and machine)")


def optimize_engine(args):
    """The --engine of a command that takes --optimize (None: the default); an error without
    --optimize."""
    from ..errors import CaffeError
    if args.engine is not None and not args.optimize:
        raise CaffeError("--engine %s chooses inference mode's engine: add --optimize"
                         % args.engine)
    return args.engine


def load_net(args, phase):
    """The --model net in ``phase`` with the --level / --stage NetState (and --num-classes)."""
    from ..net import Net
    return Net(args.model, phase, level=args.level, stages=tuple(stages(args)),
               num_classes=getattr(args, "num_classes", None))


def setup_logging(args):
    """stderr, and ``--log`` (``<log>.rank<N>`` on each rank of an MPI job)."""
    from ..log import rank_log_path
    setup_log(logfile=rank_log_path(getattr(args, "log", None)))


def add_unknown_fields(parser):
    parser.add_argument("--ignore-unknown-fields", action="store_true",
                        help="build nets whose files name fields caffepy does not know (each "
                             "ignored field is named in a WARNING); without it such a field is an "
                             "error unless it is a memory/precision/engine hint")


def add_structure_strict(parser):
    """Commands that only read a net's structure (summary, draw) drop fields caffepy does not know
    with one WARNING naming them; --strict makes them errors, as for the commands that compute."""
    parser.add_argument("--strict", action="store_true",
                        help="fields caffepy does not know are errors (by default this command, "
                             "which only reads the structure, names them in a WARNING and goes on)")
    parser.add_argument("--ignore-unknown-fields", action="store_true", help=argparse.SUPPRESS)


def unknown_fields(args):
    """A context in which files are read with the --ignore-unknown-fields policy; for the
    structure-only commands (those with --strict), lenient unless --strict."""
    from ..proto.unknown_fields import lenient
    if hasattr(args, "strict"):
        return lenient(not args.strict, reason="not computed: %s only reads the structure; "
                       "--strict makes it an error" % args.command_name)
    return lenient(getattr(args, "ignore_unknown_fields", False))
