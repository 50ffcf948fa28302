"""The solver loop (Caffe's ``Solver``): nets, iterations, testing, snapshots, signals, callbacks.

One iteration (``step``) is, as in ``Solver::Step``::

    clear param diffs
    test all test nets        if test_interval and iter % test_interval == 0 (iter 0: test_initialization)
    callbacks.on_start()
    loss = mean over iter_size of net.forward_backward()   (param diffs accumulate)
    smoothed loss over the last average_loss iterations; display every `display` iterations
    callbacks.on_gradients_ready()
    apply_update()                                          (the update rule: subclasses)
    iter += 1
    snapshot                  if snapshot and iter % snapshot == 0, or an action asks for one
    stop                      if an action asks for it (SIGINT / SIGHUP, see signals.py)

``solve()`` runs ``max_iter - iter`` steps, snapshots at the end (``snapshot_after_train``), shows
the final loss and runs the final test. A non-finite loss stops training with a SolverError naming
the first layer whose output became non-finite.

The net fields (``net`` / ``net_param`` / ``train_net`` / ``train_net_param``, ``test_net`` /
``test_net_param``, ``train_state`` / ``test_state``) and their precedence are Caffe's; net paths
are relative to the current directory; ``weights`` (','-separated models, as ``--weights``) are
copied into the train and test nets once they are built. Subclasses implement ``pre_solve`` (history blobs),
``apply_update``, ``state_history`` / ``restore_history``.
"""
import os
import threading
import time

import numpy as np

from .. import common
from ..log import Progress, fmt, info
from ..errors import SolverError, WriteError
from ..net import Net
from ..proto import caffe_pb2, io as proto_io
from . import debug, state as state_io, tensorboard
from .evaluate import NONE, SNAPSHOT, STOP, TestPasses


class Solver(TestPasses):
    type = None

    def __init__(self, param, dtype=np.float32):
        from .params import load_solver_param
        self.param = load_solver_param(param)
        self.dtype = np.dtype(dtype)
        self.check_param()
        from ..log import is_lead_rank
        if is_lead_rank():      # once per job, not once per MPI rank
            info("solver.cpp:45", "Initializing solver from parameters: \n"
                 + proto_io.to_text(self.param))
        self._check_snapshot_write_permissions()
        if self.param.random_seed >= 0:
            common.set_random_seed(self.param.random_seed + common._state.solver_rank)
        self._callbacks = []
        self._action_fn = None
        self.tensorboard_dir = tensorboard.default_dir()   # caffepy train --tensorboard DIR
        self._boards = {}                                  # run folder: tensorboard.Board
        self._board_lock = threading.Lock()
        self.requested_early_exit = False
        self.net = self._init_train_net()
        self.test_nets = self._init_test_nets()
        for weights in self.param.weights:
            self.load_weights(weights)
        info("solver.cpp:57", "Solver scaffolding done.")
        self.iter = 0
        self.current_step = 0
        self.smoothed_loss = 0.0
        self._losses = []
        self.test_scores = [[] for _ in self.test_nets]
        self.pre_solve()

    # -- setup ---------------------------------------------------------------------------------
    def check_param(self):
        """Solver-specific checks of the parameters (subclasses extend)."""

    def pre_solve(self):
        """Create the history blobs (subclasses)."""

    def _read_net(self, path):
        if not os.path.exists(path):
            raise SolverError("net file %s does not exist (net paths in solver files are relative "
                              "to the current directory, %s)" % (path, os.getcwd()))
        return proto_io.read_net(path)

    @staticmethod
    def _merged_state(phase, net_param, solver_state):
        state = caffe_pb2.NetState()
        state.phase = phase
        state.MergeFrom(net_param.state)
        if solver_state is not None:
            state.MergeFrom(solver_state)
        return state

    def _build_net(self, net_param, state, filename=None):
        net_param.state.CopyFrom(state)
        return Net(net_param, phase=state.phase, level=state.level,
                   stages=tuple(s for s in state.stage if s), dtype=self.dtype, filename=filename)

    def _init_train_net(self):
        p = self.param
        fields = ("net", "net_param", "train_net", "train_net_param")
        given = [f for f in fields if p.HasField(f)]
        if not given:
            raise SolverError("SolverParameter must specify a train net using one of these "
                              "fields: %s" % ", ".join(fields))
        if len(given) > 1:
            raise SolverError("SolverParameter must not contain more than one of these fields "
                              "specifying a train net: %s (got %s)" % (", ".join(fields), ", ".join(given)))
        f = given[0]
        if f in ("net_param", "train_net_param"):
            info("solver.cpp:87", "Creating training net specified in %s." % f)
            net_param = caffe_pb2.NetParameter()
            net_param.CopyFrom(getattr(p, f))
        else:
            info("solver.cpp:102", "Creating training net from %s file: %s" % (f, getattr(p, f)))
            net_param = self._read_net(getattr(p, f))
        state = self._merged_state(caffe_pb2.TRAIN, net_param, p.train_state)
        path = getattr(p, f) if f in ("net", "train_net") else None
        return self._build_net(net_param, state, filename=path)

    def _init_test_nets(self):
        p = self.param
        generic = int(p.HasField("net")) + int(p.HasField("net_param"))
        n_specific = len(p.test_net_param) + len(p.test_net)
        if generic:
            if len(p.test_iter) < n_specific:
                raise SolverError("test_iter must be specified for each test network")
        elif len(p.test_iter) != n_specific:
            raise SolverError("test_iter must be specified for each test network "
                              "(%d test_iter for %d test nets)" % (len(p.test_iter), n_specific))
        sources = [("test_net_param", tp) for tp in p.test_net_param]
        sources += [("test_net file: " + path, path) for path in p.test_net]
        for _ in range(len(p.test_iter) - n_specific):
            if p.HasField("net_param"):
                sources.append(("net_param", p.net_param))
            else:
                sources.append(("net file: " + p.net, p.net))
        if len(p.test_state) and len(p.test_state) != len(sources):
            raise SolverError("test_state must be unspecified or specified once per test net "
                              "(%d test_state for %d test nets)" % (len(p.test_state), len(sources)))
        if sources and p.test_interval <= 0:
            raise SolverError("test_interval must be > 0 when there are test nets (got %d)"
                              % p.test_interval)
        nets = []
        for i, (what, src) in enumerate(sources):
            if isinstance(src, str):
                net_param = self._read_net(src)
            else:
                net_param = caffe_pb2.NetParameter()
                net_param.CopyFrom(src)
            state = self._merged_state(caffe_pb2.TEST, net_param,
                                       p.test_state[i] if len(p.test_state) else None)
            info("solver.cpp:190", "Creating test net (#%d) specified by %s" % (i, what))
            nets.append(self._build_net(net_param, state,
                                        filename=src if isinstance(src, str) else None))
        return nets

    def _check_snapshot_write_permissions(self):
        p = self.param
        if not p.snapshot:
            return
        if not p.HasField("snapshot_prefix"):
            raise SolverError("In solver params, snapshot is specified but snapshot_prefix is not")
        probe = state_io.snapshot_filename(p.snapshot_prefix, 0, ".tempfile")
        try:
            with open(probe, "w"):
                pass
            os.remove(probe)
        except OSError:
            raise SolverError("Cannot write to snapshot prefix '%s'.  Make sure that the directory "
                              "exists and is writeable." % p.snapshot_prefix)

    # -- callbacks and actions -----------------------------------------------------------------
    def add_callback(self, on_start, on_gradients_ready=None):
        """Register callbacks: two callables, or one object with on_start / on_gradients_ready."""
        if on_gradients_ready is None and hasattr(on_start, "on_gradients_ready"):
            obj = on_start
            on_start, on_gradients_ready = obj.on_start, obj.on_gradients_ready
        self._callbacks.append((on_start or (lambda: None), on_gradients_ready or (lambda: None)))

    def set_action_function(self, fn):
        """``fn()`` returns "none", "stop" or "snapshot"; polled after each iteration and test batch."""
        self._action_fn = fn

    def _requested_action(self):
        return self._action_fn() if self._action_fn is not None else NONE

    # -- the loop ------------------------------------------------------------------------------
    def step(self, iters):
        p = self.param
        start_iter, stop_iter = self.iter, self.iter + int(iters)
        self._losses = []
        self.smoothed_loss = 0.0
        timer, iterations_last = time.time(), self.iter
        progress = Progress(stop_iter, "train", initial=start_iter)
        # MobileNet-YOLO's Layer::set_iter(iter, stop): the layers whose class has it, found once
        # (a class attribute: a Python layer answers for its user object's attributes too)
        iter_layers = [layer for layer in self.net.layers if hasattr(type(layer), "set_iter")]
        try:
            while self.iter < stop_iter:
                self.net.clear_param_diffs()
                if (p.test_interval and self.iter % p.test_interval == 0
                        and (self.iter > 0 or p.test_initialization)):
                    self.test_all()
                    if self.requested_early_exit:
                        break
                for on_start, _ in self._callbacks:
                    on_start()
                display = bool(p.display) and self.iter % p.display == 0
                for layer in iter_layers:
                    layer.set_iter(self.iter, stop_iter)
                loss = 0.0
                for _ in range(p.iter_size):
                    part = self._forward_backward(display and p.debug_info)
                    if not np.isfinite(part):
                        raise SolverError(debug.nonfinite_message(self.net, self.iter, part))
                    loss += part
                loss /= p.iter_size
                self._update_smoothed_loss(loss, start_iter, p.average_loss)
                if display:
                    lapse = time.time() - timer
                    per_s = (self.iter - iterations_last) / (lapse if lapse else 1.0)
                    info("solver.cpp:239", "Iteration %d (%s iter/s, %ss/%d iters), loss = %s"
                             % (self.iter, fmt(per_s), fmt(lapse), p.display, fmt(self.smoothed_loss)))
                    timer, iterations_last = time.time(), self.iter
                    self._log_outputs(self.net, "Train", "solver.cpp:258")
                    self._board_write(dict(
                        tensorboard.output_scalars("train/output", [
                            (n, self.net.blobs[n].data.ravel()) for n in self.net.outputs]),
                        **{"train/loss": self.smoothed_loss, "train/loss_raw": loss,
                           "train/steps_per_s": per_s}))
                for _, on_gradients_ready in self._callbacks:
                    on_gradients_ready()
                self.apply_update()
                if display:
                    self._board_write({"train/lr": getattr(self, "lr", 0.0)}, flush=True)
                if display and p.debug_info:
                    debug.update_debug(self.net)
                self.iter += 1
                progress.update(self.iter, loss=self.smoothed_loss, lr=getattr(self, "lr", 0.0))
                request = self._requested_action()
                if (p.snapshot and self.iter % p.snapshot == 0) or request == SNAPSHOT:
                    self.snapshot()
                if request == STOP:
                    self.requested_early_exit = True
                    break
        finally:
            progress.close()

    def _forward_backward(self, debug_info):
        if debug_info:
            return debug.forward_backward_debug(self.net)
        return self.net.forward_backward()

    def _update_smoothed_loss(self, loss, start_iter, average_loss):
        if len(self._losses) < average_loss:
            self._losses.append(loss)
            n = len(self._losses)
            self.smoothed_loss = (self.smoothed_loss * (n - 1) + loss) / n
        else:
            idx = (self.iter - start_iter) % average_loss
            self.smoothed_loss += (loss - self._losses[idx]) / average_loss
            self._losses[idx] = loss

    def solve(self, resume_file=None):
        try:
            self._solve(resume_file)
        finally:
            self.close_tensorboard()

    def _solve(self, resume_file):
        info("solver.cpp:289", "Solving %s" % self.net.name)
        info("solver.cpp:290", "Learning Rate Policy: %s" % self.param.lr_policy)
        self.requested_early_exit = False
        if resume_file:
            info("solver.cpp:297", "Restoring previous solver status from %s" % resume_file)
            self.restore(resume_file)
        start_iter = self.iter
        p = self.param
        self.step(p.max_iter - self.iter)
        if p.snapshot_after_train and (not p.snapshot or self.iter % p.snapshot != 0):
            self.snapshot()
        if self.requested_early_exit:
            info("solver.cpp:318", "Optimization stopped early.")
            return
        if p.display and self.iter % p.display == 0:
            loss = self.net.forward_prefilled()
            self._update_smoothed_loss(loss, start_iter, p.average_loss)
            info("solver.cpp:327", "Iteration %d, loss = %s" % (self.iter, fmt(self.smoothed_loss)))
            self._board_write({"train/loss": self.smoothed_loss}, flush=True)
        if p.test_interval and self.iter % p.test_interval == 0:
            self.test_all()
        info("solver.cpp:332", "Optimization Done.")

    # -- TensorBoard (tensorboard.py) ---------------------------------------------------------
    def tensorboard_board(self, run=""):
        """The open event writer of ``tensorboard_dir`` (``run``: of its subfolder ``run``),
        opened on first use; None without a ``tensorboard_dir``."""
        if not self.tensorboard_dir:
            return None
        with self._board_lock:
            board = self._boards.get(run)
            if board is None:
                path = (os.path.join(self.tensorboard_dir, run) if run     # one writer each
                        else tensorboard.rank_dir(self.tensorboard_dir))
                board = self._boards[run] = tensorboard.Board(path)
            return board

    def _board_write(self, values, step=None, flush=False):
        board = self.tensorboard_board()
        if board is not None:
            board.scalars(values, self.iter if step is None else step)
            if flush:
                board.flush()

    def close_tensorboard(self):
        """Flush and close the event files (a later write opens new ones)."""
        with self._board_lock:
            boards, self._boards = list(self._boards.values()), {}
        for board in boards:
            board.close()

    # -- snapshots -----------------------------------------------------------------------------
    def snapshot_filename(self, extension):
        return state_io.snapshot_filename(self.param.snapshot_prefix, self.iter, extension)

    def snapshot(self):
        """Write ``<prefix>_iter_<N>.caffemodel`` then ``.solverstate`` (or the .h5 pair). A write
        that fails (disk full) raises one line naming the file and the last complete snapshot;
        the pair is never left half-written (a weights file whose state failed is removed)."""
        hdf5 = self.param.snapshot_format == caffe_pb2.SolverParameter.HDF5
        model = None
        try:
            if hdf5:
                path = self.snapshot_filename(".caffemodel.h5")
                info("solver.cpp:473", "Snapshotting to HDF5 file %s" % path)
                self.net.save_hdf5(path, self.param.snapshot_diff)
                model, path = path, self.snapshot_filename(".solverstate.h5")
                info("sgd_solver.cpp:293", "Snapshotting solver state to HDF5 file %s" % path)
            else:
                path = self.snapshot_filename(".caffemodel")
                info("solver.cpp:464", "Snapshotting to binary proto file %s" % path)
                self.net.save(path, self.param.snapshot_diff)
                model, path = path, self.snapshot_filename(".solverstate")
                info("sgd_solver.cpp:284",
                         "Snapshotting solver state to binary proto file %s" % path)
            from ..data import state as data_state
            state_io.write_state(path, self.iter, model, self.current_step, self.state_history(),
                                 hdf5, data_state.net_state(self.net),
                                 data_state.rng_state(common.rng()))
        except (OSError, WriteError) as e:
            if model is not None and os.path.exists(model):
                os.unlink(model)      # its state was not written: not a snapshot
            err = proto_io.write_error(path, e)
            last = getattr(self, "_last_snapshot", None)
            raise WriteError("%s; snapshot of iteration %d not taken, the last complete one is %s"
                             % (err, self.iter, last or "none"), err.errno) from e
        self._last_snapshot = path
        return path

    def restore(self, state_file):
        """Resume from a .solverstate / .solverstate.h5: iter, current_step, history, weights."""
        state_file = os.fspath(state_file)
        it, learned, current_step, history = state_io.read_state(state_file, self.dtype)
        if learned:
            state_io.load_weights(self.net, state_io.resolve_learned_net(learned, state_file))
        self.iter, self.current_step = int(it), int(current_step)
        self.restore_history(history, state_file)
        from ..data import state as data_state
        layers, random = state_io.read_data_state(state_file)
        data_state.restore_net(self.net, layers, state_file)   # the data continues where it stopped
        if random is not None:
            data_state.restore_rng(common.rng(), random)
        self._last_snapshot = state_file

    def state_history(self):
        return []

    def restore_history(self, history, source):
        if history:
            raise SolverError("%s: Incorrect length of history blobs (%d, expected 0)"
                              % (source, len(history)))

    # -- pycaffe conveniences ------------------------------------------------------------------
    def load_weights(self, model_list):
        """Copy trained layers from each ','-separated model into the train and test nets."""
        for name in model_list.split(","):
            info("caffe.cpp:170", "Finetuning from %s" % name)
            self.net.copy_from(name)
            for net in self.test_nets:
                net.copy_from(name)

    def share_weights(self, net):
        net.share_trained_layers_with(self.net)

    def apply_update(self):
        raise NotImplementedError
