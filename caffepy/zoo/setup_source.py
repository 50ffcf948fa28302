"""The top shapes a Python data layer's ``setup`` writes as literals, read from its source without
running it: for ``caffepy summary`` when the module does not import here (a package the
repository needs is not installed) or its setup fails before it shapes its tops (it opens its
data set first).

    def setup(self, bottom, top):
        self.loader = SpectrogramDataset(...)          # needs librosa, reads a manifest
        top[0].reshape(20, 1, 161, 81)
        top[1].reshape(20, 1, 100, 100)

gives [(20, 1, 161, 81), (20, 1, 100, 100)] for a layer with two tops. The module's file is
found on ``sys.path`` by its dotted name (``a/b.py`` or ``a/b/__init__.py``; nothing is
imported) and parsed; source that Python 3 does not parse is translated as the Python layer
translates Python 2 source (:func:`caffepy.layers.python2_source.translate`). The calls read are
``TOP[i].reshape(d0, d1, ...)`` (or one tuple / list argument) inside the ``setup`` method of
the class ``python_param.layer``, where ``TOP`` is the method's third parameter, every ``d`` a
positive integer literal and ``i`` an integer literal or any expression. With literal indices
every top must be reshaped (the first call per index counts); with other indices (a counter the
setup increments) the calls must be as many as the tops and are taken in source order. Anything
else (a size from a variable, a reshape in a helper method, fewer calls) gives None: the
input-size search decides then.
"""
import ast
import os
import sys


def module_file(module_name, path=None):
    """The file of ``module_name`` on ``path`` (``sys.path`` by default), found without importing
    anything, or None."""
    parts = module_name.split(".")
    if not module_name or not all(p.isidentifier() for p in parts):
        return None
    for root in (sys.path if path is None else path):
        base = os.path.join(root or ".", *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


def _parse(path):
    with open(path, "rb") as f:
        source = f.read(1 << 20).decode("utf-8", "replace")
    try:
        return ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        pass
    try:
        from ..layers.python2_source import translate
        return ast.parse(translate(source, path), filename=path)
    except Exception:       # noqa: BLE001 -- source neither Python 3 nor 2: nothing to read
        return None


def _dims(call):
    """The positive integer literals ``call`` reshapes to, or None."""
    args = call.args
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = args[0].elts
    if not args or call.keywords:
        return None
    dims = []
    for a in args:
        if not (isinstance(a, ast.Constant) and type(a.value) is int and a.value > 0):
            return None
        dims.append(a.value)
    return tuple(dims)


def _reshapes(setup):
    """[(literal index or None, dims or None)] of the ``TOP[i].reshape(...)`` calls in ``setup``,
    in source order."""
    params = setup.args.args
    if len(params) < 3:
        return []
    top = params[2].arg
    calls = []
    for node in ast.walk(setup):
        f = getattr(node, "func", None)
        if not (isinstance(node, ast.Call) and isinstance(f, ast.Attribute)
                and f.attr == "reshape" and isinstance(f.value, ast.Subscript)
                and isinstance(f.value.value, ast.Name) and f.value.value.id == top):
            continue
        index = f.value.slice
        literal = index.value if isinstance(index, ast.Constant) and \
            type(index.value) is int else None
        calls.append(((node.lineno, node.col_offset), literal, _dims(node)))
    return [(i, d) for _, i, d in sorted(calls, key=lambda c: c[0])]


def setup_shapes(module_name, class_name, num_tops, path=None):
    """[shape per top] that class ``class_name``'s ``setup`` in module ``module_name`` writes as
    literals (module doc), or None."""
    file = module_file(module_name, path)
    tree = _parse(file) if file else None
    if tree is None or num_tops < 1:
        return None
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == class_name:
            setup = [f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "setup"]
            calls = _reshapes(setup[0]) if setup else []
            break
    else:
        return None
    if not calls or any(d is None for _, d in calls):
        return None
    if all(i is not None for i, _ in calls):
        shapes = {}
        for i, d in calls:
            shapes.setdefault(i, d)
        if sorted(shapes) != list(range(num_tops)):
            return None
        return [shapes[i] for i in range(num_tops)]
    if len(calls) != num_tops:
        return None
    return [d for _, d in calls]
