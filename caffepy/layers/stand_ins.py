"""caffepy's stand-ins for well-known third-party Python layers, and how one is chosen.

A fork family names its class for a ``python_param`` (module, layer) with
``register_stand_in("rpn.proposal_layer", "ProposalLayer", "pkg.mod:Class")``; the ``Python``
layer uses it when that module is not on ``sys.path`` (``caffepy.layers.python_layer``).

Forks copy each other's module and class names for different layers (R-C3D's twin proposal layer
is ``rpn.proposal_layer.ProposalLayer`` like py-faster-rcnn's), so one (module, layer) may have
several stand-ins. Each class then says which layers it takes in its ``stand_in_form``, a
:class:`StandInForm`: the fork it comes from, the bottom and top counts, the ``param_str`` keys it
needs, and, where the counts do not tell the forks apart, a check of the bottom shapes.

The ``Python`` layer chooses in its setup, from its blobs: the first registered stand-in whose
form fits. Families register in the order the layer registry imports them
(``caffepy.layers._all``: by package name, then in each package's list), so the first fork to take
a name keeps the layers that fit it. When none fits, :class:`NoStandInFits` names each form known
and why it does not fit. A class without a ``stand_in_form`` takes any layer.
"""
import importlib
import re

_STAND_INS = {}       # (module, layer) -> ["package.module:Class", ...], in registration order


def _span(count):
    lo, hi = (count, count) if isinstance(count, int) else count
    return int(lo), int(hi)


def _counted(n, what):
    return "%d %s%s" % (n, what, "" if n == 1 else "s")


_KEY = re.compile(r"""(?:^|[{,\s])['"]?([A-Za-z_]\w*)['"]?\s*:""")


def param_str_keys(text):
    """The keys a ``param_str`` names (``key: value`` lines, or a Python / YAML / JSON dict)."""
    return set(_KEY.findall(text or ""))


class StandInForm(object):
    """The layers a stand-in takes.

    ``fork``: whose layer it is (for messages); ``bottoms``, ``tops``: a count or an inclusive
    ``(min, max)``; ``keys``: ``param_str`` keys that must be there; ``shapes``: ``None`` or a
    function ``(param_str, bottom shapes) -> None`` when they fit, else a one-line reason;
    ``note``: what ``shapes`` checks, for the list of forms.
    """

    def __init__(self, fork, bottoms, tops, keys=(), shapes=None, note=""):
        self.fork = fork
        self.bottoms, self.tops = _span(bottoms), _span(tops)
        self.keys = tuple(keys)
        self.shapes = shapes
        self.note = note

    def describe(self):
        """``fork's layer [counts, keys, note]``."""
        parts = [self._counts("bottom", self.bottoms), self._counts("top", self.tops)]
        if self.keys:
            parts.append("param_str keys %s" % " ".join(self.keys))
        if self.note:
            parts.append(self.note)
        return "%s's layer [%s]" % (self.fork, ", ".join(parts))

    @staticmethod
    def _counts(what, span):
        lo, hi = span
        return _counted(lo, what) if lo == hi else "%d-%d %ss" % (lo, hi, what)

    def problem(self, param_str, shapes, num_tops):
        """Why a layer with this ``param_str``, bottoms of these ``shapes`` and ``num_tops`` tops
        does not fit, or None."""
        problems = []
        for what, n, (lo, hi) in (("bottom", len(shapes), self.bottoms),
                                  ("top", num_tops, self.tops)):
            if not lo <= n <= hi:
                problems.append("it has %s" % _counted(n, what))
        missing = [k for k in self.keys if k not in param_str_keys(param_str)]
        if missing:
            problems.append("param_str has no %s" % ", ".join(missing))
        if not problems and self.shapes is not None:
            problems.append(self.shapes(param_str, [tuple(s) for s in shapes]))
        return "; ".join(p for p in problems if p) or None


def form_of(cls):
    return getattr(cls, "stand_in_form", None)


class NoStandInFits(ValueError):
    """Stand-ins exist for the layer's (module, layer), but the form of none fits it."""


def register_stand_in(module_name, class_name, target):
    """Name caffepy's class ``target`` ("package.module:Class") as a stand-in for the well-known
    third-party Python layer ``module_name.class_name``. Fork families register theirs in their
    package ``__init__`` (found when the layer registry discovers ``caffepy.forks``); a second
    class for the same (module, layer) is tried after the first (see the module doc)."""
    targets = _STAND_INS.setdefault((module_name, class_name), [])
    if target not in targets:
        targets.append(target)


def stand_in_classes(module_name, class_name):
    """caffepy's classes standing in for ``module_name.class_name``, in registration order."""
    from .base import load_all
    load_all()
    out = []
    for target in _STAND_INS.get((module_name, class_name), ()):
        module, _, attr = target.partition(":")
        out.append(getattr(importlib.import_module(module), attr))
    return out


def builtin_layer_class(module_name, class_name):
    """caffepy's (first) class standing in for ``module_name.class_name``, or None when there is
    none; which one a layer gets depends on its form (:func:`fitting_stand_ins`)."""
    classes = stand_in_classes(module_name, class_name)
    return classes[0] if classes else None


def _no_fit(python_param, shapes, num_tops, problems):
    bottoms = _counted(len(shapes), "bottom")
    if shapes:
        bottoms += ": " + ", ".join(str(tuple(s)) for s in shapes)
    return NoStandInFits(
        "no stand-in of caffepy's for %s.%s takes this layer (%s; %s); the forms known: %s"
        % (python_param.module, python_param.layer, bottoms, _counted(num_tops, "top"),
           "; ".join("%s does not fit: %s" % (form_of(cls).describe(), why)
                     for cls, why in problems)))


def fitting_stand_ins(python_param, shapes, num_tops):
    """The stand-ins for ``python_param``'s (module, layer) whose form fits a layer with bottoms
    of these ``shapes`` and ``num_tops`` tops, in registration order. [] when there are none for
    that name; raises :class:`NoStandInFits` when there are some but none fits."""
    classes = stand_in_classes(python_param.module, python_param.layer)
    problems = [(cls, form_of(cls).problem(python_param.param_str, shapes, num_tops)
                 if form_of(cls) else None) for cls in classes]
    fitting = [cls for cls, why in problems if not why]
    if classes and not fitting:
        raise _no_fit(python_param, shapes, num_tops, problems)
    return fitting
