"""glog-format logging, so caffepy's training logs read (and parse) exactly like Caffe's.

Every line has glog's prefix::

    I1121 10:00:00.000001  1234 solver.cpp:239] Iteration 100 (12.3 iter/s, 8.1s/100 iters), loss = 0.1

severity letter (I/W/E/F), ``MMDD``, ``HH:MM:SS.uuuuuu``, the thread id right-aligned in 5 columns,
``file:line]`` and the message. Messages that Caffe's own tools parse (``tools/extra/parse_log.py``,
``parse_log.sh``, DIGITS) carry Caffe's ``file:line`` tag (``solver.cpp:239`` ...) through
``extra={"tag": ...}``; every other record gets the Python ``file.py:line`` it came from. Numbers are
printed as C++ ostreams print them (6 significant digits): :func:`fmt`.

``caffepy.log("text")`` (pycaffe's ``caffe.log``) logs one INFO line. The ``caffepy`` logger has no
handler until :func:`setup` is called (the CLI does it; library users
may), so importing caffepy prints nothing. ``GLOG_minloglevel`` (0 INFO, 1 WARNING, 2 ERROR) is
honoured as in Caffe. Progress bars (:class:`Progress`, tqdm) are drawn only when the stream is a
TTY and are lifted off the terminal for each log line, so they never reach a log file or a pipe.

:func:`parse_training_log` reads such a log back into the rows of Caffe's
``tools/extra/parse_log.py`` (``tools/parse_log.py`` and ``caffepy plot`` use it).
"""
import collections
import csv
import datetime
import logging
import os
import re
import sys
import threading
import types

LOGGER_NAME = "caffepy"
_LETTER = {logging.DEBUG: "I", logging.INFO: "I", logging.WARNING: "W", logging.ERROR: "E",
           logging.CRITICAL: "F"}
_GLOG_LEVELS = [logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL]

logger = logging.getLogger(LOGGER_NAME)


def fmt(x):
    """A number as ``std::ostream << x`` prints it (``%g``: 6 significant digits, 1e-05, nan, inf)."""
    if isinstance(x, (int,)) and not isinstance(x, bool):
        return str(x)
    return "%g" % float(x)


class GlogFormatter(logging.Formatter):
    """``Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg`` (glog's LogMessage prefix)."""

    def format(self, record):
        t = datetime.datetime.fromtimestamp(record.created)
        tag = getattr(record, "tag", None) or "%s:%d" % (record.filename, record.lineno)
        tid = getattr(record, "native_tid", None) or threading.get_native_id()
        prefix = "%s%02d%02d %02d:%02d:%02d.%06d %5d %s] " % (
            _LETTER.get(record.levelno, "I"), t.month, t.day, t.hour, t.minute, t.second,
            t.microsecond, tid, tag)
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        return prefix + msg


class _TidFilter(logging.Filter):
    def filter(self, record):
        record.native_tid = threading.get_native_id()
        return True


class GlogHandler(logging.StreamHandler):
    """A stream handler that lifts the active progress bars (:class:`Progress`) off the terminal
    while it writes a line, and draws them again below it."""

    def __init__(self, stream=None):
        super().__init__(stream)
        self.bars = []

    def emit(self, record):
        if self.bars:
            from tqdm import tqdm
            with tqdm.external_write_mode(file=self.stream):
                super().emit(record)
        else:
            super().emit(record)


def _min_level(minloglevel=None):
    if minloglevel is None:
        try:
            minloglevel = int(os.environ.get("GLOG_minloglevel", "0"))
        except ValueError:
            minloglevel = 0
    return _GLOG_LEVELS[max(0, min(int(minloglevel), 3))]


def teardown():
    """Remove the handlers :func:`setup` installed (closing a log file)."""
    for h in list(logger.handlers):
        if getattr(h, "_caffepy", False):
            logger.removeHandler(h)
            if isinstance(h, logging.FileHandler):
                h.close()


def setup(stream=None, minloglevel=None, logfile=None):
    """Send the ``caffepy`` logger's records to ``stream`` (stderr) and ``logfile`` in glog format.

    ``minloglevel`` is glog's (0 INFO, 1 WARNING, 2 ERROR, 3 FATAL; default ``$GLOG_minloglevel``).
    Replaces any handler a previous call installed. Returns the stream handler.
    """
    teardown()
    handler = GlogHandler(stream if stream is not None else sys.stderr)
    handler._caffepy = True
    handler.setFormatter(GlogFormatter())
    handler.addFilter(_TidFilter())
    logger.addHandler(handler)
    if logfile:
        fh = logging.FileHandler(logfile)
        fh._caffepy = True
        fh.setFormatter(GlogFormatter())
        fh.addFilter(_TidFilter())
        logger.addHandler(fh)
    logger.setLevel(_min_level(minloglevel))
    logger.propagate = False
    return handler


def info(tag, msg):
    logger.info(msg, extra={"tag": tag})


def warning(tag, msg):
    logger.warning(msg, extra={"tag": tag})


def error(tag, msg):
    logger.error(msg, extra={"tag": tag})


class _CallableModule(types.ModuleType):
    """Lets ``caffepy.log`` be this module and pycaffe's ``caffe.log(message)`` function at once."""

    def __call__(self, message):
        info("pycaffe", str(message))


sys.modules[__name__].__class__ = _CallableModule


def _handler_streams():
    return [h for h in logger.handlers if isinstance(h, GlogHandler)]


def _is_tty(stream):
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):     # no isatty, or a closed stream
        return False


class Progress(object):
    """A tqdm progress bar on the log stream, drawn only when that stream is a TTY.

    ``Progress(total, label, initial=0)`` (drawn below the bars already shown, e.g. a test pass
    under the training bar); ``update(done, **fields)`` moves it to
    ``done`` and shows ``fields`` (``loss=0.25, lr=0.01``) after the rate and ETA; ``close()``
    erases it. Off a TTY (a pipe, a file), or with ``CAFFEPY_PROGRESS=0``, every call is a no-op,
    so logs keep exactly their glog lines. tqdm is imported only when a bar is drawn.
    """

    def __init__(self, total, label="train", initial=0, unit="iter"):
        handlers = _handler_streams()
        self.handler = handlers[0] if handlers else None
        stream = self.handler.stream if self.handler else None
        self.active = (_is_tty(stream)
                       and os.environ.get("CAFFEPY_PROGRESS", "1") not in ("0", "off"))
        self.bar = None
        if self.active:
            try:
                from tqdm import tqdm
            except ImportError:       # a dependency; without it, logs only
                self.active = False
                return
            self.bar = tqdm(total=max(int(total), 1), initial=int(initial), desc=label, unit=unit,
                            file=stream, leave=False, dynamic_ncols=True,
                            position=len(self.handler.bars),
                            bar_format="{desc} {n_fmt}/{total_fmt} {bar} [{elapsed}<{remaining}, "
                                       "{rate_fmt}]{postfix}")
            self.handler.bars.append(self)

    def update(self, done, **fields):
        if not self.active:
            return
        if fields:
            self.bar.set_postfix_str(", ".join("%s %s" % (k, fmt(v)) for k, v in fields.items()),
                                     refresh=False)
        self.bar.update(int(done) - self.bar.n)

    def close(self):
        if self.active:
            self.active = False
            self.bar.close()
            if self in self.handler.bars:
                self.handler.bars.remove(self)


# -- reading training logs back (Caffe's tools/extra/parse_log.py) --------------------------------
_RE_ITERATION = re.compile(r"Iteration (\d+)")
_RE_TRAIN = re.compile(r"Train net output #(\d+): (\S+) = ([\.\deE+-]+|nan|-?inf)")
_RE_TEST = re.compile(r"Test net output #(\d+): (\S+) = ([\.\deE+-]+|nan|-?inf)")
_RE_LR = re.compile(r"lr = ([-+]?[0-9]*\.?[0-9]+([eE]?[-+]?[0-9]+)?)")


def line_datetime(line, year):
    """The timestamp of a glog line (``I0210 13:39:22.381027 ...``); ValueError if it has none."""
    fields = line.strip().split()
    if len(fields) < 2 or len(fields[0]) != 5:
        raise ValueError("not a glog line")
    month, day = int(fields[0][1:3]), int(fields[0][3:])
    stamp = fields[1]
    pos = stamp.rfind(".")
    h, m, s = (int(x) for x in stamp[:pos].split(":"))
    return datetime.datetime(year, month, day, h, m, s, int(stamp[pos + 1:]))


def _output_row(regex, row, rows, line, iteration, seconds, lr):
    match = regex.search(line)
    if match:
        if not row or row["NumIters"] != iteration:
            if row:
                rows.append(row)
            row = collections.OrderedDict([("NumIters", iteration), ("Seconds", seconds),
                                           ("LearningRate", lr)])
        row[match.group(2)] = float(match.group(3))
    if row and rows and len(row) == len(rows[0]):
        rows.append(row)
        row = None
    return row


def parse_training_log(path):
    """``(train_rows, test_rows)``: one OrderedDict per display / test, as Caffe's parse_log.py.

    Columns: NumIters, Seconds (since the ``Solving`` line), LearningRate, then each net output.
    """
    year = datetime.datetime.fromtimestamp(os.path.getctime(path)).year
    train, test = [], []
    train_row = test_row = None
    iteration, lr = -1, float("nan")
    with open(path, errors="replace") as f:
        start = None
        for line in f:
            if "Solving" in line:
                start = line_datetime(line, year)
                break
        if start is None:
            raise ValueError("%s: no 'Solving' line: not a Caffe training log" % path)
        last = start
        for line in f:
            m = _RE_ITERATION.search(line)
            if m:
                iteration = float(m.group(1))
            if iteration == -1:
                continue
            try:
                when = line_datetime(line, year)
            except (ValueError, IndexError):
                continue
            if when.month < last.month:
                year += 1
                when = line_datetime(line, year)
            last = when
            seconds = (when - start).total_seconds()
            m = _RE_LR.search(line)
            if m:
                lr = float(m.group(1))
            train_row = _output_row(_RE_TRAIN, train_row, train, line, iteration, seconds, lr)
            test_row = _output_row(_RE_TEST, test_row, test, line, iteration, seconds, lr)
    for rows in (train, test):
        if len(rows) > 1:
            rows[0]["LearningRate"] = rows[1]["LearningRate"]
    return train, test


def write_csv(path, rows, delimiter=","):
    """Write rows as CSV with a header (nothing is written for no rows, as Caffe's script)."""
    if not rows:
        return False
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()), delimiter=delimiter,
                                lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(rows)
    return True


# -- which rank of an MPI job this process is, from the launcher's environment (no MPI import) --
# Used before any communicator exists: ``--log L`` becomes ``L.rank<N>`` on rank N of a multi-rank
# job (:func:`rank_log_path`), and only rank 0 prints the solver parameters (:func:`is_lead_rank`).
# MPICH/Hydra (``PMI_RANK`` / ``PMI_SIZE``), Open MPI (``OMPI_COMM_WORLD_*``), Slurm with PMIx
# (``PMIX_RANK`` / ``SLURM_STEP_NUM_TASKS``).
_RANK_VARS = (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
              ("PMIX_RANK", "SLURM_STEP_NUM_TASKS"))


def launcher_rank():
    """(rank, size) from the MPI launcher's environment; (0, 1) outside mpiexec / srun."""
    for rank_var, size_var in _RANK_VARS:
        try:
            size = int(os.environ.get(size_var, "1"))
            if rank_var in os.environ and size > 1:
                return int(os.environ[rank_var]), size
        except ValueError:
            continue
    return 0, 1


def is_lead_rank():
    return launcher_rank()[0] == 0


def rank_log_path(path):
    """``path.rank<N>`` when started as one of several MPI ranks, else ``path``."""
    rank, size = launcher_rank()
    return "%s.rank%d" % (path, rank) if path and size > 1 else path
