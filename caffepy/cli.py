"""The ``caffepy`` command: ``caffepy <command> [flags]``, one module per command.

Each module in ``caffepy/commands/`` defines ``NAME`` (the command), ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args)`` (returns an exit code or None). Commands are discovered,
not listed. Flags accept gflags spellings as Caffe's tools do: ``-solver S``, ``--solver S``,
``-solver=S``, ``--solver=S``. A user error (:class:`caffepy.errors.CaffeError`, a missing file) prints
one line and exits 1; a traceback is shown only with ``CAFFEPY_DEBUG=1``. Every command takes
``--layers MODULE`` (repeatable): plug-in layer modules imported before it runs
(caffepy.layers.plugins); ``--proto PATH`` (before or after the command's name) loads a Caffe
fork's own caffe.proto for the command (:mod:`caffepy.proto.user_schema`).
"""
import argparse
import importlib
import os
import pkgutil
import re
import sys

from .errors import CaffeError

_SINGLE_DASH_LONG = re.compile(r"^-([A-Za-z_][A-Za-z0-9_]+)(=.*)?$")


def normalize_gflags(argv):
    """Turn gflags' single-dash long flags (``-solver x``, ``-gpu=0``) into ``--solver x``."""
    out = []
    for a in argv:
        m = _SINGLE_DASH_LONG.match(a)
        if m and len(m.group(1)) > 1:
            out.append("--" + a[1:])
        else:
            out.append(a)
    return out


def _commands():
    from . import commands
    found = {}
    for info in pkgutil.iter_modules(commands.__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module("%s.%s" % (commands.__name__, info.name))
        if hasattr(mod, "NAME"):
            found[mod.NAME] = mod
    return found


def build_parser():
    parser = argparse.ArgumentParser(prog="caffepy", description="Caffe-compatible deep learning in Python.")
    from . import __version__
    parser.add_argument("--version", action="version", version="caffepy %s" % __version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_proto(parser, None)
    for name, mod in sorted(_commands().items()):
        p = sub.add_parser(name, help=getattr(mod, "HELP", ""), description=getattr(mod, "HELP", ""))
        mod.add_arguments(p)
        p.add_argument("--layers", action="append", default=[], metavar="MODULE",
                       help="load plug-in layers from MODULE first (a module on sys.path or a .py "
                            "file; repeatable; also $CAFFEPY_LAYERS)")
        _add_proto(p, argparse.SUPPRESS)
        p.set_defaults(_run=mod.run)
    return parser


def _load_plugins(args):
    """Import the --layers and $CAFFEPY_LAYERS modules (after caffepy's own layers) before the
    command runs, so that a module that fails is reported as itself, not as a net's error."""
    from .layers import plugins
    if getattr(args, "layers", None) or plugins.env_specs():
        from . import log
        if not log._handler_streams():
            log.setup()
        plugins.load_modules(args.layers, "--layers")


def _add_proto(parser, default):
    """``--proto PATH``: a Caffe fork's own caffe.proto, merged with caffepy's schema for the
    command (see caffepy.proto.user_schema); before or after the command name."""
    if any("--proto" in a.option_strings for a in parser._actions):
        return                               # a command with a --proto of its own keeps it
    parser.add_argument("--proto", metavar="PATH/caffe.proto", default=default,
                        help="a Caffe fork's own caffe.proto: its nets parse with its fields "
                             "(compiled with grpcio-tools; also $CAFFEPY_PROTO)")


def _unraisable(unraisable):
    """``sys.unraisablehook`` while a command runs: an exception Python cannot raise (one in a
    ``__del__`` of a user's Python layer module, as its objects are collected) is one WARNING
    line naming it and where it happened, not a traceback on stderr."""
    import logging
    from .layers.python_layer import exception_text, user_code_location
    error = unraisable.exc_value
    where = user_code_location(error) if error is not None else None
    logging.getLogger("caffepy").warning(
        "%s %s: %s%s", unraisable.err_msg or "Exception ignored in",
        getattr(unraisable.object, "__qualname__", None) or repr(unraisable.object)[:80],
        "%s: %s" % (type(error).__name__, exception_text(error)) if error is not None else "?",
        " (%s)" % where if where else "")


def main(argv=None):
    argv = normalize_gflags(sys.argv[1:] if argv is None else list(argv))
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 1
    hook, sys.unraisablehook = sys.unraisablehook, _unraisable
    try:
        from .proto.user_schema import using
        from .proto.digits import class_count
        from .proto.templates import defined
        with using(getattr(args, "proto", None), via="--proto"), \
                defined(getattr(args, "define", None)), \
                class_count(getattr(args, "num_classes", None)):
            _load_plugins(args)
            rc = args._run(args)
    except CaffeError as e:
        if os.environ.get("CAFFEPY_DEBUG"):
            raise
        sys.stderr.write("caffepy %s: error: %s\n" % (args.command, str(e).splitlines()[0] if str(e) else e))
        return 1
    except (OSError, ValueError) as e:
        if os.environ.get("CAFFEPY_DEBUG"):
            raise
        sys.stderr.write("caffepy %s: error: %s\n" % (args.command, " ".join(str(e).split())))
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("caffepy %s: interrupted\n" % args.command)
        return 130
    finally:
        sys.unraisablehook = hook
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
