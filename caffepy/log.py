"""glog-format logging, so caffepy's training logs read (and parse) exactly like Caffe's.

Every line has glog's prefix::

    I1121 10:00:00.000001  1234 solver.cpp:239] Iteration 100 (12.3 iter/s, 8.1s/100 iters), loss = 0.1

severity letter (I/W/E/F), ``MMDD``, ``HH:MM:SS.uuuuuu``, the thread id right-aligned in 5 columns,
``file:line]`` and the message. Messages that Caffe's own tools parse (``tools/extra/parse_log.py``,
``parse_log.sh``, DIGITS) carry Caffe's ``file:line`` tag (``solver.cpp:239`` ...) through
``extra={"tag": ...}``; every other record gets the Python ``file.py:line`` it came from. Numbers are
printed as C++ ostreams print them (6 significant digits): :func:`fmt`.

The ``caffepy`` logger has no handler until :func:`setup` is called (the CLI does it; library users
may), so importing caffepy prints nothing. ``GLOG_minloglevel`` (0 INFO, 1 WARNING, 2 ERROR) is
honoured as in Caffe. A progress line (:class:`Progress`) is drawn only when the stream is a TTY
and is erased before each log line, so it never reaches a log file or a pipe.
"""
import datetime
import logging
import os
import sys
import threading

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
    """A stream handler that erases an active progress line before writing."""

    progress = None

    def emit(self, record):
        p = self.progress
        if p is not None and p.active:
            p.clear()
        super().emit(record)
        if p is not None and p.active:
            p.redraw()


def _min_level(minloglevel=None):
    if minloglevel is None:
        try:
            minloglevel = int(os.environ.get("GLOG_minloglevel", "0"))
        except ValueError:
            minloglevel = 0
    return _GLOG_LEVELS[max(0, min(int(minloglevel), 3))]


def setup(stream=None, minloglevel=None, logfile=None):
    """Send the ``caffepy`` logger's records to ``stream`` (stderr) and ``logfile`` in glog format.

    ``minloglevel`` is glog's (0 INFO, 1 WARNING, 2 ERROR, 3 FATAL; default ``$GLOG_minloglevel``).
    Replaces any handler a previous call installed. Returns the stream handler.
    """
    for h in list(logger.handlers):
        if getattr(h, "_caffepy", False):
            logger.removeHandler(h)
            if isinstance(h, logging.FileHandler):
                h.close()
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


def _handler_streams():
    return [h for h in logger.handlers if isinstance(h, GlogHandler)]


class Progress(object):
    """A one-line ``\\r`` progress bar on the log stream, drawn only when that stream is a TTY."""

    def __init__(self, total, label="train", width=30):
        self.total, self.label, self.width = max(int(total), 1), label, width
        handlers = _handler_streams()
        self.handler = handlers[0] if handlers else None
        stream = self.handler.stream if self.handler else None
        self.stream = stream
        self.active = bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())
        self._text = ""
        if self.active:
            self.handler.progress = self

    def update(self, done, extra=""):
        if not self.active:
            return
        done = min(max(int(done), 0), self.total)
        filled = int(self.width * done / self.total)
        self._text = "%s [%s%s] %d/%d %s" % (self.label, "#" * filled, "." * (self.width - filled),
                                             done, self.total, extra)
        self.redraw()

    def redraw(self):
        self.stream.write("\r" + self._text + "\x1b[K")
        self.stream.flush()

    def clear(self):
        self.stream.write("\r\x1b[K")
        self.stream.flush()

    def close(self):
        if self.active:
            self.clear()
            self.active = False
            if self.handler is not None and self.handler.progress is self:
                self.handler.progress = None
