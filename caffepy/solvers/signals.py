"""SIGINT / SIGHUP / SIGTERM during training, as Caffe's ``SignalHandler`` (``--sigint_effect``,
``--sighup_effect``; ``--sigterm_effect`` is caffepy's, for the SIGTERM a batch scheduler sends
before it preempts a job): each signal only sets a flag; the solver polls
:meth:`SignalHandler.action` after every iteration and before every test batch and then stops
(finishing the iteration, then the usual ``snapshot_after_train`` snapshot), snapshots, or ignores
it. Defaults: SIGINT and SIGTERM stop, SIGHUP snapshots. Distributed training
(:mod:`caffepy.dist`) turns a "stop" into a checkpoint at the next step boundary every rank agrees
on; :attr:`SignalHandler.last_signal` names the signal behind the last action.
"""
import signal
import threading

from ..errors import SolverError

EFFECTS = ("stop", "snapshot", "none")
SIGNALS = ("SIGINT", "SIGHUP", "SIGTERM")


def check_effect(flag, value):
    if value not in EFFECTS:
        raise SolverError('Invalid signal effect "%s" was specified for %s (stop, snapshot or none)'
                          % (value, flag))
    return value


class SignalHandler(object):
    """Context manager installing the handlers; ``solver.set_action_function(h.action)``."""

    def __init__(self, sigint_effect="stop", sighup_effect="snapshot", sigterm_effect="stop"):
        self.effects = {"SIGINT": check_effect("sigint_effect", sigint_effect),
                        "SIGHUP": check_effect("sighup_effect", sighup_effect),
                        "SIGTERM": check_effect("sigterm_effect", sigterm_effect)}
        self.got = {name: False for name in SIGNALS}
        self.last_signal = None
        self._previous = {}

    @property
    def sigint_effect(self):
        return self.effects["SIGINT"]

    @property
    def sighup_effect(self):
        return self.effects["SIGHUP"]

    @property
    def got_sigint(self):
        return self.got["SIGINT"]

    @property
    def got_sighup(self):
        return self.got["SIGHUP"]

    def _handle(self, signum, frame):
        for name in SIGNALS:
            if getattr(signal, name, None) == signum:
                self.got[name] = True

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for name in SIGNALS:
                sig = getattr(signal, name, None)
                if sig is not None:
                    self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}
        return False

    def action(self):
        """The requested action ("stop" / "snapshot" / "none"); each signal is reported once."""
        for name in SIGNALS:
            if self.got[name]:
                self.got[name] = False
                self.last_signal = name
                return self.effects[name]
        return "none"
