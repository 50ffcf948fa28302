"""``caffepy train --solver S``: train or finetune a model, as ``caffe train``.

``--weights a.caffemodel[,b.caffemodel]`` finetunes from trained layers (copied by layer name into
the train and test nets; it replaces the solver file's ``weights``); ``--snapshot X.solverstate``
resumes (not both, as Caffe). The solver's
``solver_mode`` / ``device_id`` pick the device unless ``--gpu`` is given (a GPU solver file on a
machine without CUDA trains on the CPU with a warning). ``--level`` / ``--stage`` set the train
net's NetState. SIGINT, SIGHUP and SIGTERM stop or snapshot (``--sigint_effect`` /
``--sighup_effect`` / ``--sigterm_effect``: stop, snapshot or none; defaults stop / snapshot /
stop; "stop" finishes the iteration and writes the ``snapshot_after_train`` snapshot; a
distributed run checkpoints at the next step boundary instead and exits 0). Any scalar SolverParameter field may be
overridden for the run, gflags-style: ``--max_iter 200 --test_interval=50 --snapshot_prefix P``
(see ``_overrides``); each override is logged. ``--resume`` needs a ``cluster`` section (or
``--cluster``) and the workspace's checkpoint folder, and says which is missing.
``--tensorboard DIR`` (default ``$CAFFEPY_TENSORBOARD``) writes TensorBoard curves
(caffepy.solvers.tensorboard).
"""
from ..log import info, logger, warning
from ..errors import CaffeError
from ..proto import caffe_pb2
from . import _flags, _gpu, _overrides

NAME = "train"
HELP = "train or finetune a model"


def add_arguments(parser):
    parser.add_argument("--solver", default="", help="the solver definition protocol buffer text file")
    parser.add_argument("--weights", default="",
                        help="pretrained weights to initialize finetuning, separated by ','; "
                             "cannot be set together with --snapshot")
    parser.add_argument("--snapshot", default="", help="the solver state to resume training from")
    parser.add_argument("--cluster", default="",
                        help="distributed training: a ClusterParameter text file (caffepy.dist)")
    parser.add_argument("--resume", action="store_true",
                        help="distributed training: continue from the workspace's latest complete "
                             "checkpoint")
    parser.add_argument("--overwrite", action="store_true",
                        help="distributed training: start from step 0 in a workspace that holds "
                             "checkpoints, removing them (without it, or --resume, such a run stops)")
    _flags.add_gpu(parser)
    _flags.add_net_state(parser)
    _flags.add_num_classes(parser, _flags.NEEDED)
    _flags.add_unknown_fields(parser)
    parser.add_argument("--sigint_effect", default="stop",
                        help="action on SIGINT: snapshot, stop or none (default stop)")
    parser.add_argument("--sighup_effect", default="snapshot",
                        help="action on SIGHUP: snapshot, stop or none (default snapshot)")
    parser.add_argument("--sigterm_effect", default="stop",
                        help="action on SIGTERM (a batch scheduler's notice before preemption): "
                             "snapshot, stop or none (default stop)")
    parser.add_argument("--skip_bad_records", action="store_true",
                        help="skip a record that cannot be read (damaged Datum, image that does "
                             "not decode) with one WARNING per record, instead of stopping with "
                             "one line naming it (also $CAFFEPY_SKIP_BAD_RECORDS=1)")
    parser.add_argument("--tensorboard", default="", metavar="DIR",
                        help="write TensorBoard event files to DIR: train loss (smoothed and raw), "
                             "test outputs, lr, steps/s, per worker group in a distributed run "
                             "(default $CAFFEPY_TENSORBOARD; needs tensorboardX)")
    _flags.add_iterations(parser, "ignored by train, as in Caffe (set max_iter in the solver)")
    _flags.add_log(parser)
    # -- solver field overrides (--max_iter N ...); keep this call last -----------------------
    _overrides.add_arguments(parser)


def _devices(args, param):
    flag = args.gpu
    if not flag and param.solver_mode == caffe_pb2.SolverParameter.GPU:
        flag = str(param.device_id if param.HasField("device_id") else 0)
        if _gpu.device_count() == 0:
            warning("caffe.cpp:196", "solver_mode is GPU but no CUDA device is available; "
                        "training on the CPU")
            return []
    return _gpu.parse_gpus(flag)


def run(args):
    with _flags.unknown_fields(args):
        return _run(args)


def _run(args):
    from ..solvers import load_solver_param, solver_class
    from ..solvers.signals import SignalHandler, check_effect
    _flags.setup_logging(args)
    if not args.solver:
        raise CaffeError("Need a solver definition to train (--solver)")
    if args.snapshot and args.weights:
        raise CaffeError("Give a snapshot to resume training or weights to finetune but not both.")
    check_effect("sigint_effect", args.sigint_effect)
    check_effect("sighup_effect", args.sighup_effect)
    check_effect("sigterm_effect", args.sigterm_effect)
    if getattr(args, "skip_bad_records", False):
        import os
        from ..layers.data import SKIP_ENV
        os.environ[SKIP_ENV] = "1"       # (the prefetch threads read it)
    if args.iterations is not None:
        warning("caffe.cpp:185", "--iterations is ignored by train (as in Caffe); the solver's "
                    "max_iter decides")
    param = load_solver_param(args.solver)
    # -- overrides, then a --resume that says what it expects ---------------------------------
    _overrides.apply(args, param, args.solver, lambda text: logger.info(text))
    if args.resume:
        _check_resume(args, param)
    if args.snapshot or args.weights:  # the flags replace the solver file's `weights`
        del param.weights[:]
    if args.weights:
        param.weights.append(args.weights)
    param.train_state.level = args.level
    param.train_state.stage.extend(_flags.stages(args))
    gpus = _devices(args, param)
    _gpu.use_devices(gpus)
    if gpus:
        param.device_id = gpus[0]
    with SignalHandler(args.sigint_effect, args.sighup_effect, args.sigterm_effect) as handler:
        # the nets the solver builds take --num-classes from caffepy.cli's digits.class_count
        solver = solver_class(param.type)(param)
        if args.tensorboard:
            solver.tensorboard_dir = args.tensorboard
        try:
            _train(args, solver, handler, gpus)
        finally:
            solver.close_tensorboard()
    info("caffe.cpp:250", "Optimization Done.")
    return 0


def _train(args, solver, handler, gpus):
    solver.set_action_function(handler.action)
    if args.snapshot:
        info("caffe.cpp:248", "Resuming from %s" % args.snapshot)
        solver.restore(args.snapshot)
    if args.cluster or args.resume or solver.param.HasField("cluster"):
        from .. import dist
        dist.train(solver, cluster_file=args.cluster or None, resume=args.resume,
                   overwrite=args.overwrite)
    elif len(gpus) > 1:
        _multi_gpu(solver, gpus)
    else:
        info("caffe.cpp:239", "Starting Optimization")
        solver.solve()


def _check_resume(args, param):
    """--resume continues a distributed run from its checkpoint folder: say what is missing."""
    import os
    if not (args.cluster or param.HasField("cluster")):
        raise CaffeError("--resume continues a distributed run: %s has no `cluster` section and "
                         "no --cluster FILE was given (to resume a single-process run, use "
                         "--snapshot PREFIX_iter_N.solverstate)" % args.solver)
    from ..dist import checkpoint, topology
    workspace = topology.load_cluster(param, args.cluster or None).workspace
    folder = checkpoint.checkpoint_dir(workspace)
    if not os.path.isdir(folder):
        raise CaffeError("--resume: no checkpoint folder %s (the cluster's workspace '%s' gets one "
                         "once a distributed run has checkpointed; the solver's "
                         "checkpoint_frequency sets how often)" % (folder, workspace))


def _multi_gpu(solver, gpus):
    from .. import dist
    runner = getattr(dist, "train_multi_gpu", None)
    if runner is None:
        raise CaffeError("training on %d GPUs (%s) needs caffepy.dist.train_multi_gpu, which this "
                         "build lacks; give one --gpu id" % (len(gpus), ",".join(map(str, gpus))))
    runner(solver, gpus)
