"""SIGINT / SIGHUP during training, as Caffe's ``SignalHandler`` (``--sigint_effect``,
``--sighup_effect``): each signal only sets a flag; the solver polls :meth:`SignalHandler.action`
after every iteration and before every test batch and then stops (finishing the iteration, then
the usual ``snapshot_after_train`` snapshot), snapshots, or ignores it. Defaults: SIGINT stops,
SIGHUP snapshots.
"""
import signal
import threading

from ..errors import SolverError

EFFECTS = ("stop", "snapshot", "none")


def check_effect(flag, value):
    if value not in EFFECTS:
        raise SolverError('Invalid signal effect "%s" was specified for %s (stop, snapshot or none)'
                          % (value, flag))
    return value


class SignalHandler(object):
    """Context manager installing the handlers; ``solver.set_action_function(h.action)``."""

    def __init__(self, sigint_effect="stop", sighup_effect="snapshot"):
        self.sigint_effect = check_effect("sigint_effect", sigint_effect)
        self.sighup_effect = check_effect("sighup_effect", sighup_effect)
        self.got_sigint = self.got_sighup = False
        self._previous = {}

    def _handle(self, signum, frame):
        if signum == signal.SIGINT:
            self.got_sigint = True
        else:
            self.got_sighup = True

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for name in ("SIGINT", "SIGHUP"):
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
        if self.got_sigint:
            self.got_sigint = False
            return self.sigint_effect
        if self.got_sighup:
            self.got_sighup = False
            return self.sighup_effect
        return "none"
