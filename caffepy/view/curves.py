"""Training curves for the page: loss, accuracy and learning rate from Caffe-format logs.

:func:`read_curves` parses logs as ``caffepy plot`` does (caffepy.log.parse_training_log; a
distributed log's per-group lines through caffepy.dist.report.parse_group_log) and returns
``{"series": [{"name", "kind": "loss"|"accuracy"|"lr"|"other", "phase", "x": [...], "y": [...]}],
"files": [...]}``, or None when no log has a row yet. Values that are not finite become null.
"""
import math
import os


def _kind(name):
    low = name.lower()
    if "loss" in low:
        return "loss"
    if "acc" in low:
        return "accuracy"
    return "other"


def _clean(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _series(rows, phase, prefix=""):
    out = []
    if not rows:
        return out
    names = [k for k in rows[0] if k not in ("NumIters", "Seconds", "LearningRate")]
    x = [r["NumIters"] for r in rows]
    for name in names:
        out.append({"name": prefix + name, "kind": _kind(name), "phase": phase, "x": x,
                    "y": [_clean(r.get(name)) for r in rows]})
    if phase == "train":
        out.append({"name": prefix + "lr", "kind": "lr", "phase": phase, "x": x,
                    "y": [_clean(r.get("LearningRate")) for r in rows]})
    return out


def read_curves(logs):
    """The curves of the logs ``logs`` (paths); None when none has a row."""
    from ..dist.report import parse_group_log
    from ..log import parse_training_log
    series, files = [], []
    for path in logs:
        if not os.path.exists(path):
            continue
        files.append(os.path.basename(path))
        try:
            groups = parse_group_log(path)
        except (OSError, ValueError):
            groups = {}
        prefix = "%s: " % os.path.basename(path) if len(logs) > 1 else ""
        if groups:
            for g in sorted(groups):
                series += _series(groups[g], "train", "%sgroup %d " % (prefix, g))
            continue
        try:
            train, test = parse_training_log(path)
        except (OSError, ValueError):
            continue
        series += _series(train, "train", prefix + "train ")
        series += _series(test, "test", prefix + "test ")
    return {"series": series, "files": files} if series else None


class Follow(object):
    """``Follow(logs)()``: :func:`read_curves` of ``logs``, parsed again only when a log (or one
    of its ``.rank<N>`` files) changed size or modification time since the last call: what the
    served page's ``/curves.json`` returns at each poll."""

    def __init__(self, logs):
        import threading
        self.logs, self._key, self._value = list(logs), None, None
        self._lock = threading.Lock()

    def _stamp(self):
        from ..dist.report import log_files
        out = []
        for path in self.logs:
            for name in log_files(path):
                try:
                    st = os.stat(name)
                except OSError:
                    continue
                out.append((name, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def __call__(self):
        with self._lock:
            key = self._stamp()
            if key != self._key:
                self._value, self._key = read_curves(self.logs), key
            return self._value
