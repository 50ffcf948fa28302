"""Which engine runs inference mode: caffepy's own steps (caffepy.infer.plan), onnxruntime
(caffepy.infer.ort) or openvino (caffepy.infer.ov).

    Net(..., optimize=True)                      engine: CAFFEPY_INFER_ENGINE, else "auto"
    Net(..., optimize="openvino")                the engine by name (Classifier / Detector too)
    net.optimize(keep=[...], engine="caffepy")   "auto" | "caffepy" | "onnxruntime" | "openvino"
    caffepy time|test --optimize --engine {auto,caffepy,onnxruntime,openvino}

The runtimes (onnxruntime, openvino) run the same parts (caffepy.infer.parts: ONNX parts,
caffepy layers between them) where they can be imported, the mode is CPU and the net is
float32; elsewhere they are not candidates.

``auto``: without a runtime caffepy's steps run, without a word. Otherwise each candidate is
built, checked against the exact path on one random batch (caffepy.infer.choice.Reference:
every output and kept blob within ``RTOL``, 1e-4, relative) and timed on the net's own shapes
(caffepy.infer.choice.median_time: three warm-up passes, the median of up to seven, about
four seconds at most each, caffepy's steps at least five warm-up passes, one per thread setting
they try), then those within twice the fastest timed again in the reverse order, each keeping
the lesser time (caffepy.infer.choice.decide); the fastest that passed runs. caffepy's candidate goes first: a trial plan whose
folded weights are copies, the net put back after it (caffepy.infer.plan.trial); when it wins
its plan is built again, folding in place. A runtime's plan is kept while it is within twice
the fastest, the others are let go. A candidate that fails its check is left out after
one WARNING line saying why; when none passes caffepy's steps run, after one WARNING. The
choice is cached (caffepy.infer.choice: per net text, input shapes, kept blobs, machine and
versions), so the next plan of the same net here builds the chosen engine alone, checks it (a
runtime; when that fails the candidates are measured again) and times nothing. One INFO line
names the engine and the candidates' times; ``plan.choice`` holds them
({"engine", "ms", "cached"}; None when the engine was forced or was the only one).

A named engine runs without timing; ``onnxruntime`` / ``openvino`` raise
:class:`caffepy.errors.NetError` when unavailable or when their check fails; ``caffepy`` is not
checked (it never runs the exact path, so its peak memory stays the lean one). ``threads``
("auto" / "fixed") is caffepy's engine's per-pass thread choice; the runtimes always run the
thread limit (caffepy.infer.threads.limit).

Weights: every engine runs the weights the net has when it is planned (the runtimes hold their
own copies, caffepy's steps fold them in place); loading or saving weights is refused in the
mode.
"""
import logging
import os

import numpy as np

from . import choice
from ..errors import CaffeError, NetError

ENGINES = ("auto", "caffepy", "onnxruntime", "openvino")
CANDIDATES = ("caffepy", "onnxruntime", "openvino")     # the order auto measures them in
ENV = "CAFFEPY_INFER_ENGINE"
RTOL = 1e-4
MODE = "optimize mode"
RUNTIMES = {        # name -> (module, plan class, how to install)
    "onnxruntime": ("ort", "OrtPlan", "pip install onnxruntime"),
    "openvino": ("ov", "OvPlan", "pip install 'caffepy[openvino]'"),
}

_log = logging.getLogger(__name__)


def choose(engine=None):
    """The engine's name: ``engine``, else ``CAFFEPY_INFER_ENGINE``, else "auto"."""
    name = engine if engine is not None else (os.environ.get(ENV) or "auto")
    if name not in ENGINES:
        raise NetError("inference engine must be one of %s (engine= or %s), got %r"
                       % (", ".join(ENGINES), ENV, name))
    return name


def _module(name):
    import importlib
    return importlib.import_module("." + RUNTIMES[name][0], __package__)


def unsupported(net, name="onnxruntime"):
    """Why runtime ``name`` cannot run ``net`` here, or None."""
    from .. import common
    if not _module(name).available():
        return "%s is not installed (%s)" % (name, RUNTIMES[name][2])
    if common.mode() == common.GPU:
        return "the net runs in GPU mode and the %s engine here runs on the CPU" % name
    if np.dtype(net.dtype) != np.float32:
        return "the net is %s and the %s engine runs float32" % (np.dtype(net.dtype), name)
    return None


def _one_line(e):
    return " ".join(str(e).split())[:300] or type(e).__name__


def _failed(e):
    if isinstance(e, CaffeError):
        return _one_line(e)
    return "%s: %s" % (type(e).__name__, _one_line(e))     # the runtime's own errors


def try_runtime(net, name, keep=(), threads=None, reference=None):
    """(plan, None) when runtime ``name``'s parts are built and pass the check, else
    (None, why)."""
    try:
        plan = getattr(_module(name), RUNTIMES[name][1])(net, keep, threads)
        why = choice.worst(plan.check(reference), RTOL)
    except Exception as e:
        return None, _failed(e)
    return (plan, None) if why is None else (None, why)


def optimize(net, keep=(), threads=None, engine=None):
    """Switch ``net`` (built, TEST phase, weights loaded) to inference mode with ``engine`` (see
    module doc); returns the plan (``plan.engine`` names the engine that runs)."""
    from . import plan as plan_mod
    name = choose(engine)
    plan_mod.validate(net, keep, threads)
    if name == "caffepy":
        return plan_mod.optimize(net, keep, threads)
    if name in RUNTIMES:
        why = unsupported(net, name)
        plan = None
        if why is None:
            plan, why = try_runtime(net, name, keep, threads)
        if plan is None:
            raise NetError("net '%s': engine '%s' of %s: %s" % (net.name, name, MODE, why))
        return _enter(net, plan)
    runtimes = [n for n in CANDIDATES if n in RUNTIMES and unsupported(net, n) is None]
    if not runtimes:
        return plan_mod.optimize(net, keep, threads)
    return _auto(net, keep, threads, runtimes)


def _enter(net, plan, decided=None):
    plan.commit()
    plan.choice = decided
    net._plan = plan
    return plan


class _Candidates(object):
    """Builds, checks and times the candidates of ``auto`` for choice.decide, caffepy's trial
    first; each measure is called once per round. A runtime's plan is built and checked once and
    kept while its time is within ``choice.CONTEND`` of the fastest so far (it may be timed
    again in the second round, and building the winner again would cost more peak memory than
    keeping it: the native libraries seldom give memory back); the others are let go at once.
    caffepy's trial plan is built again for its second round (the net is put back after each)."""

    def __init__(self, net, keep, threads, runtimes):
        self.net, self.keep, self.threads = net, keep, threads
        self.runtimes = runtimes
        self.reference = None
        self.plans = {}                 # runtime name -> its plan, checked
        self.times = {}                 # name -> its fastest time so far
        self.why = {}

    def ref(self):
        if self.reference is None:
            self.reference = choice.Reference(self.net, self.keep)
        return self.reference

    def measures(self):
        out = {"caffepy": self.caffepy}
        out.update((n, (lambda n=n: self.runtime(n))) for n in self.runtimes)
        return out

    def _timed(self, name, t):
        """Record ``t`` for ``name``; let go of the runtime plans out of contention."""
        self.times[name] = min(t, self.times.get(name, t))
        best = min(self.times.values())
        for n in [n for n in self.plans if self.times.get(n, best) > choice.CONTEND * best]:
            del self.plans[n]
        return t

    def _time(self, forward, least=1):
        with self.ref().fed():
            return choice.median_time(forward, least=least)

    def runtime(self, name):
        if name in self.why:
            return None
        plan = self.plans.get(name)
        if plan is None:
            if name in self.times:      # let go: out of contention, its time stands
                return self.times[name]
            plan, why = try_runtime(self.net, name, self.keep, self.threads, self.ref())
            if plan is None:
                self.why[name] = why
                return None
            self.plans[name] = plan
        try:
            t = self._time(plan.forward)
        except Exception as e:
            self.why[name] = _failed(e)
            self.plans.pop(name, None)
            return None
        return self._timed(name, t)

    def caffepy(self):
        from . import plan as plan_mod
        if "caffepy" in self.why:
            return None
        try:
            self.ref()          # the exact path's values, before the trial changes any layer
            with plan_mod.trial(self.net, self.keep, self.threads) as trial:
                if "caffepy" not in self.times:
                    why = choice.worst(self.ref().errors(trial.forward), RTOL)
                    if why is not None:
                        self.why["caffepy"] = why
                        return None
                t = self._time(trial.forward, choice.EXPLORING)
        except Exception as e:
            self.why["caffepy"] = _failed(e)
            return None
        return self._timed("caffepy", t)

    def plan(self, name):
        """The runtime plan of ``name`` kept here, or None."""
        return self.plans.get(name)


def _auto(net, keep, threads, runtimes):
    from . import plan as plan_mod
    from .threads import limit
    k = choice.key(net, keep, limit(), threads=threads)
    cands = _Candidates(net, keep, threads, runtimes)
    name, ms, cached = choice.decide(k, cands.measures())
    if cached and name in RUNTIMES:
        plan, why = try_runtime(net, name, keep, threads, cands.ref())
        if plan is None:
            _log.warning("net '%s': the cached choice of %s's engine, %s, failed: %s; measuring "
                         "the candidates again", net.name, MODE, name, why)
            name, ms, cached = choice.decide(k, cands.measures(), use_cache=False)
        else:
            cands.plans = {name: plan}
    for n, why in sorted(cands.why.items()):
        _log.warning("net '%s': %s leaves out engine '%s': %s", net.name, MODE, n, why)
    decided = {"engine": name or "caffepy", "ms": ms, "cached": cached}
    if name is None:
        _log.warning("net '%s': no engine of %s passed its check; caffepy's own steps run",
                     net.name, MODE)
        plan = plan_mod.optimize(net, keep, threads)
        plan.choice = decided
        return plan
    _log.info("net '%s': %s runs %s (%s)", net.name, MODE, name, describe(decided))
    if name == "caffepy":
        plan = plan_mod.optimize(net, keep, threads)
        plan.choice = decided
        return plan
    return _enter(net, cands.plan(name), decided)


def describe(decided):
    """The candidates' times of a choice, fastest first, as one line."""
    ms = decided["ms"]
    ranked = sorted((n for n in ms if ms[n] is not None), key=ms.get)
    text = ", ".join("%s %.3g ms" % (n, ms[n]) for n in ranked)
    failed = [n for n in ms if ms[n] is None]
    if failed:
        text += "%sfailed the check: %s" % ("; " if text else "", ", ".join(failed))
    return text + ("; cached choice, %s" % choice.path() if decided["cached"] else "")
