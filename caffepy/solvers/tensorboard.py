"""TensorBoard curves of a training run: ``caffepy train --tensorboard DIR`` or
``CAFFEPY_TENSORBOARD=DIR`` in the environment.

The solver writes, next to its log lines and at the same iteration numbers:

- every ``display`` iterations: ``train/loss`` (the smoothed loss the log line shows),
  ``train/loss_raw`` (that iteration's loss, averaged over ``iter_size``), ``train/lr``,
  ``train/steps_per_s`` and ``train/output/<name>`` for every train net output (``<name>/<k>``
  for element k of a multi-element output);
- after every test pass of test net #i: ``test/<i>/<output>`` (the means ``Test net output``
  logs) and, with ``test_compute_loss``, ``test/<i>/test_loss`` (the ``Test loss`` line);
- in a distributed run (caffepy.dist), the first worker of each group every ``display`` steps:
  ``group<g>/loss``, ``group<g>/lr`` and ``group<g>/steps_per_s`` (the ``Iteration N (group g of
  G)`` line), in the run folder ``DIR/group<g>``: groups step at their own pace, and one event
  file whose steps go back is cut by TensorBoard's reader (it drops the "orphaned" later steps).
  Under MPI a rank N > 0 that writes the solver's own series writes them to ``DIR/rank<N>``.

The event files are tensorboardX's (``pip install 'caffepy[tensorboard]'``), written
synchronously and flushed at each display, after each test pass and when the writer closes (at
the end of ``solve()`` and of ``caffepy train``, on errors and after a signal stops the run).
tensorboardX is imported only when a directory is given.
"""
import atexit
import os
import threading
import time

from ..errors import CaffeError

ENV = "CAFFEPY_TENSORBOARD"
_open = set()            # writers not closed yet (closed at exit)
_open_lock = threading.Lock()


def default_dir():
    """The directory ``$CAFFEPY_TENSORBOARD`` names, or None."""
    return os.environ.get(ENV) or None


def rank_dir(logdir):
    """``logdir`` on MPI rank 0 (or outside MPI), ``logdir/rank<N>`` on rank N."""
    from ..log import launcher_rank
    rank, size = launcher_rank()
    return os.path.join(logdir, "rank%d" % rank) if size > 1 and rank > 0 else logdir


class Board(object):
    """One event file in ``logdir``: ``scalar(tag, value, step)``, ``flush()``, ``close()``.
    Safe to share between threads (the worker groups of an in-process distributed run)."""

    def __init__(self, logdir):
        try:
            from tensorboardX.event_file_writer import EventsWriter
            from tensorboardX.proto import event_pb2, summary_pb2
        except ImportError as e:
            raise CaffeError("--tensorboard / $%s needs tensorboardX (pip install "
                             "'caffepy[tensorboard]'): %s" % (ENV, e))
        self.logdir = logdir
        self._event, self._summary = event_pb2.Event, summary_pb2.Summary
        try:
            os.makedirs(logdir, exist_ok=True)
            self._writer = EventsWriter(os.path.join(logdir, "events"), ".%d" % os.getpid())
        except OSError as e:
            raise CaffeError("cannot write TensorBoard events to %s: %s" % (logdir, e))
        self._lock = threading.Lock()
        self.closed = False
        with _open_lock:
            _open.add(self)

    def scalar(self, tag, value, step):
        summary = self._summary(value=[self._summary.Value(tag=tag, simple_value=float(value))])
        event = self._event(wall_time=time.time(), step=int(step), summary=summary)
        with self._lock:
            if not self.closed:
                self._writer.write_event(event)

    def scalars(self, values, step):
        """``{tag: value}`` at one step."""
        for tag, value in values.items():
            self.scalar(tag, value, step)

    def flush(self):
        with self._lock:
            if not self.closed:
                self._writer.flush()

    def close(self):
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._writer.close()
        with _open_lock:
            _open.discard(self)


def output_scalars(prefix, outputs):
    """``{prefix/name: v}`` (``prefix/name/k`` for element k of a multi-element output) from
    ``[(name, values)]``."""
    out = {}
    for name, values in outputs:
        values = list(values)
        if len(values) == 1:
            out["%s/%s" % (prefix, name)] = values[0]
        else:
            for k, v in enumerate(values):
                out["%s/%s/%d" % (prefix, name, k)] = v
    return out


@atexit.register
def _close_all():
    with _open_lock:
        boards = list(_open)
    for board in boards:
        board.close()
