"""Which engine runs inference mode: onnxruntime (caffepy.infer.ort) or caffepy's own steps
(caffepy.infer.plan).

    Net(..., optimize=True)                      engine: CAFFEPY_INFER_ENGINE, else "auto"
    Net(..., optimize="onnxruntime")             the engine by name (Classifier / Detector too)
    net.optimize(keep=[...], engine="caffepy")   "auto" | "caffepy" | "onnxruntime"
    caffepy time|test --optimize --engine {auto,caffepy,onnxruntime}

``auto``: where onnxruntime can be imported, the mode is CPU and the net is float32, the net is
cut into onnxruntime and caffepy parts (caffepy.infer.parts), built, and run once on random
inputs beside the exact path; when every output and kept blob agrees within ``RTOL`` (1e-5)
relative, the parts run from then on; otherwise caffepy's own steps run, after one WARNING line
saying why. Without onnxruntime, in GPU mode or for a float64 net caffepy's steps run, without a
word. ``onnxruntime`` raises :class:`caffepy.errors.NetError` where ``auto`` would fall back;
``caffepy`` never tries onnxruntime. ``threads`` ("auto" / "fixed") is caffepy's engine's
per-pass thread choice; onnxruntime's sessions always run the thread limit
(caffepy.infer.threads.limit).
"""
import logging
import os

import numpy as np

from ..errors import CaffeError, NetError

ENGINES = ("auto", "caffepy", "onnxruntime")
ENV = "CAFFEPY_INFER_ENGINE"
RTOL = 1e-5
MODE = "optimize mode"

_log = logging.getLogger(__name__)


def choose(engine=None):
    """The engine's name: ``engine``, else ``CAFFEPY_INFER_ENGINE``, else "auto"."""
    name = engine if engine is not None else (os.environ.get(ENV) or "auto")
    if name not in ENGINES:
        raise NetError("inference engine must be one of %s (engine= or %s), got %r"
                       % (", ".join(ENGINES), ENV, name))
    return name


def unsupported(net):
    """Why the onnxruntime engine cannot run ``net`` here, or None."""
    from .. import common
    from . import ort
    if not ort.available():
        return "onnxruntime is not installed (pip install onnxruntime)"
    if common.mode() == common.GPU:
        return "the net runs in GPU mode and onnxruntime's engine here runs on the CPU"
    if np.dtype(net.dtype) != np.float32:
        return "the net is %s and the onnxruntime engine runs float32" % np.dtype(net.dtype)
    return None


def _one_line(e):
    return " ".join(str(e).split())[:300] or type(e).__name__


def try_onnxruntime(net, keep=(), threads=None):
    """(OrtPlan, None) when the parts are built and pass the check, else (None, why)."""
    from .ort import OrtPlan
    try:
        plan = OrtPlan(net, keep, threads)
        errors = plan.check()
    except CaffeError as e:
        return None, _one_line(e)
    except Exception as e:          # onnxruntime's own errors (a model it refuses to load)
        return None, "%s: %s" % (type(e).__name__, _one_line(e))
    worst = max(errors, key=errors.get) if errors else None
    if worst is not None and not errors[worst] <= RTOL:
        return None, ("blob '%s' differs from the exact path by %.3g relative (> %g) on random "
                      "inputs" % (worst, errors[worst], RTOL))
    return plan, None


def optimize(net, keep=(), threads=None, engine=None):
    """Switch ``net`` (built, TEST phase, weights loaded) to inference mode with ``engine`` (see
    module doc); returns the plan (``plan.engine``: "onnxruntime" or "caffepy")."""
    from . import plan as plan_mod
    name = choose(engine)
    plan_mod.validate(net, keep, threads)
    if name == "caffepy":
        return plan_mod.optimize(net, keep, threads)
    why = unsupported(net)
    if why is not None:
        if name == "onnxruntime":
            raise NetError("net '%s': engine 'onnxruntime' of %s: %s" % (net.name, MODE, why))
        return plan_mod.optimize(net, keep, threads)
    plan, why = try_onnxruntime(net, keep, threads)
    if plan is None:
        if name == "onnxruntime":
            raise NetError("net '%s': engine 'onnxruntime' of %s: %s" % (net.name, MODE, why))
        _log.warning("net '%s': %s runs caffepy's own steps, not onnxruntime: %s",
                     net.name, MODE, why)
        return plan_mod.optimize(net, keep, threads)
    plan.commit()
    net._plan = plan
    return plan
