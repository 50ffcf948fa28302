"""Python layer modules written in Python 2 syntax, translated to Python 3 in memory.

A user's module whose source does not compile under Python 3 (``SyntaxError``, ``TabError``:
``print x``, ``except E, e``, a file indented with tabs and spaces mixed ...) is translated and the
translation is what runs; so is a module that compiles but reads a builtin only Python 2 has
(:data:`PY2_BUILTINS`: ``xrange``, ``unicode``, ``long`` ...) that it never binds itself
(:func:`python2_builtins`), as Python 3 would stop there with a ``NameError`` and its ``/`` on
integers was written as Python 2's, and so is a module of a package that imports a module beside
it by Python 2's implicit relative import (:func:`implicit_relative_imports`), where Python 3
stops with a ``ModuleNotFoundError``, and so is a module beside Python 2 source (a file of its
directory that does not compile but translates: :func:`python2_beside`), as one directory's modules
were written for one interpreter. Any other module that compiles is never translated. Nothing is
written: the translation lives in memory (one per source text and module name per process) and
its code objects keep the user's file name, so tracebacks and ``file.py:line`` point at the
user's file (the translation keeps the lines where they were).

The translation, in order:

1. **Tabs.** Python 2 reads a tab in the indentation as advancing to the next multiple of 8
   columns (and does not compare tabs with spaces, as Python 3's ``TabError`` does): every line's
   leading whitespace is expanded that way, except on lines that continue a multi-line string,
   whose text is the string's.
2. **2to3's fixers** (``fissix``, the maintained fork of the standard library's ``lib2to3``,
   which Python 3.13 no longer ships; imported only when a module needs it): the default set of
   ``2to3`` -- ``print`` statements, ``except E, e``, ``raise E, msg``, ``xrange``,
   ``d.iteritems()``, ``d.keys()`` / ``values()`` / ``items()`` / ``map`` / ``filter`` / ``zip``
   as lists where the code needs a list, ``unicode`` / ``basestring`` / ``long``, octal ``0777``,
   ``has_key``, ``cPickle`` / ``StringIO`` / ``Queue`` module names, ``exec``, backticks ... --
   except ``future`` (``from __future__ import division`` stays, see 3). ``import x`` of a sibling
   module becomes ``from . import x`` only in a module of a package (Python 2's implicit relative
   import); a top-level module keeps ``import x``.
3. **Classic division.** Python 2's ``a / b`` of two integers is floor division; 2to3 leaves
   ``/`` alone, which changes results (a shape of ``n / 2`` becomes a float). In a translated
   module without ``from __future__ import division`` every ``a / b`` calls
   :func:`classic_div` and every ``a /= b`` assigns :func:`classic_idiv`'s result (in place as
   before for arrays): floor division when both operands are integers (Python ``int`` / ``bool``,
   numpy integer scalars or integer arrays, as numpy under Python 2 did for integer arrays), true
   division otherwise. The operands of ``x[i] /= y`` are evaluated twice (``x[i]`` read, then
   written); a subscript with side effects would see them twice.
4. **round.** Python 2's ``round(x, n=0)`` returns a float and rounds a half away from zero
   (``round(2.5) == 3.0``; Python 3 gives ``2``): a call of the builtin ``round`` (the module binds
   no ``round`` of its own) calls :func:`classic_round`.

Not translated: what 2to3 does not fix either (``sorted(cmp=...)``, ``__div__`` methods of the
user's classes, str / bytes of binary files).
"""
import ast
import copy
import hashlib

import numpy as np

DIV, IDIV, ROUND = "__py2_div__", "__py2_idiv__", "__py2_round__"
_cache = {}
_tools = {}


def _integral(x):
    if isinstance(x, int):
        return True
    return isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind in "iu"


def classic_div(a, b):
    """Python 2's ``a / b``: floor division of two integers (module doc), else true division."""
    if _integral(a) and _integral(b):
        return a // b
    return a / b


def classic_idiv(a, b):
    """Python 2's ``a /= b``: ``a //= b`` of two integers, else ``a /= b``; the result."""
    if _integral(a) and _integral(b):
        a //= b
    else:
        a /= b
    return a


def classic_round(number, ndigits=0):
    """Python 2's ``round``: the float nearest ``number`` rounded to ``ndigits`` decimals, a half
    (of the double's exact value) away from zero."""
    import decimal
    x = float(number)
    if x != x or x in (float("inf"), float("-inf")):
        return x
    with decimal.localcontext() as context:
        context.prec = 800
        exact = decimal.Decimal(x)
        step = decimal.Decimal(1).scaleb(-int(ndigits))
        return float(exact.quantize(step, rounding=decimal.ROUND_HALF_UP))


HELPERS = {DIV: classic_div, IDIV: classic_idiv, ROUND: classic_round}


def expand_indentation_tabs(source):
    """Leading tabs of every line expanded to the next multiple of 8 columns (module doc, 1)."""
    if "\t" not in source:
        return source
    lines = source.splitlines(True)
    inside = _string_continuation_lines(source)
    out = []
    for number, line in enumerate(lines, 1):
        body = line.lstrip(" \t")
        lead = line[:len(line) - len(body)]
        if "\t" in lead and number not in inside:
            line = lead.expandtabs(8) + body
        out.append(line)
    return "".join(out)


def _string_continuation_lines(source):
    """Line numbers (1-based) that begin inside a string token started on an earlier line."""
    import io
    token, tokenize = _fissix("pgen2.token"), _fissix("pgen2.tokenize")
    inside = set()
    try:
        for kind, _, start, end, _ in tokenize.generate_tokens(io.StringIO(source).readline):
            if kind == token.STRING and end[0] > start[0]:
                inside.update(range(start[0] + 1, end[0] + 1))
    except (tokenize.TokenError, IndentationError):
        pass
    return inside


def _grammar_in_memory():
    """fissix builds its grammar tables from Grammar.txt in memory (about 30 ms) instead of
    keeping them as pickles under ~/.cache/fissix and loading them back: no pickle is read from
    disk, and a read-only home directory does not stop the translation. Set once, before
    fissix.pygram is first imported (a process that imported it earlier keeps its tables)."""
    from fissix.pgen2 import driver, pgen

    def load_grammar(gt="Grammar.txt", gp=None, save=True, force=False, logger=None):
        return pgen.generate_grammar(gt)
    driver.load_grammar = load_grammar


def _fissix(name):
    """fissix's module ``name``; an ImportError saying why when fissix cannot be imported."""
    import importlib
    import sys
    try:
        if "fissix.pygram" not in sys.modules:
            _grammar_in_memory()
        return importlib.import_module("fissix." + name)
    except Exception as e:          # noqa: BLE001 -- absent, or its grammar cache unwritable
        raise ImportError("%s: %s (pip install fissix)" % (type(e).__name__, e),
                          name="fissix") from e


def _refactoring_tool(in_package):
    if in_package not in _tools:
        refactor = _fissix("refactor")
        names = [n for n in refactor.get_fixers_from_package("fissix.fixes")
                 if not n.endswith(".fix_future")
                 and (in_package or not n.endswith(".fix_import"))]
        _tools[in_package] = refactor.RefactoringTool(names)
    return _tools[in_package]


class _ClassicDivision(ast.NodeTransformer):
    """``a / b`` -> ``__py2_div__(a, b)``; ``t /= b`` -> ``t = __py2_idiv__(t, b)``."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if not isinstance(node.op, ast.Div):
            return node
        call = ast.Call(func=ast.Name(id=DIV, ctx=ast.Load()), args=[node.left, node.right],
                        keywords=[])
        return ast.copy_location(call, node)

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        if not isinstance(node.op, ast.Div):
            return node
        read = copy.deepcopy(node.target)
        read.ctx = ast.Load()
        call = ast.Call(func=ast.Name(id=IDIV, ctx=ast.Load()), args=[read, node.value],
                        keywords=[])
        return ast.copy_location(ast.Assign(targets=[node.target], value=call), node)


class _ClassicRound(ast.NodeTransformer):
    """``round(...)`` -> ``__py2_round__(...)``; ``calls`` counts them."""

    calls = 0

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "round":
            node.func = ast.copy_location(ast.Name(id=ROUND, ctx=ast.Load()), node.func)
            self.calls += 1
        return node


def _binds(tree, name):
    """Whether the module binds ``name`` anywhere (assignment, def, import, argument)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.name == name:
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name) == name:
            return True
        if isinstance(node, ast.arg) and node.arg == name:
            return True
    return False


#: Builtins of Python 2 that Python 3 removed: a module reading one it does not bind was written
#: for Python 2 (a Python 3 module that supports both binds it, ``xrange = range``).
PY2_BUILTINS = ("xrange", "unicode", "basestring", "long", "unichr", "raw_input", "execfile",
                "reduce", "cmp", "reload")


def python2_builtins(source):
    """The :data:`PY2_BUILTINS` that ``source`` (which compiles under Python 3) reads and never
    binds, sorted; empty when it names none or does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    read = {node.id for node in ast.walk(tree)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
            and node.id in PY2_BUILTINS}
    return sorted(name for name in read if not _binds(tree, name))


def implicit_relative_imports(source, path):
    """The sibling modules that ``source`` (which compiles under Python 3; the file ``path`` of a
    module of a package) imports by Python 2's implicit relative import (``from generate_anchors
    import generate_anchors`` in py-faster-rcnn's ``rpn/anchor_target_layer.py``): an absolute
    ``import x`` / ``from x import ...`` whose first name is a module beside the file (``x.py`` or
    a package ``x/``) and not a top-level module Python 3 finds on ``sys.path``; sorted, empty
    when there is none or the source does not parse."""
    import importlib.util
    import os
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    here = os.path.dirname(os.path.abspath(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    found = []
    for name in sorted(names):
        sibling = os.path.isfile(os.path.join(here, name + ".py")) or \
            os.path.isfile(os.path.join(here, name, "__init__.py"))
        if not sibling:
            continue
        try:
            top_level = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            top_level = False
        if not top_level:
            found.append(name)
    return found


MAX_BESIDE = 64                 # .py files looked at beside a module
MAX_BESIDE_BYTES = 1 << 20
_beside = {}


def python2_beside(path):
    """The name of a ``.py`` file beside ``path`` that is Python 2 source (it does not compile
    under Python 3 and its translation does), or None: the first such in name order of at most
    :data:`MAX_BESIDE` files of at most 1 MiB each, answered once per directory and process.
    The modules of one directory were written for one interpreter, so a module that compiles
    beside Python 2 source was written for Python 2 too (its ``/`` on integers is classic
    division: the shape arithmetic of a layer beside a ``print x`` data layer)."""
    import importlib.util
    import os
    here = os.path.dirname(os.path.abspath(path))
    if here not in _beside:
        _beside[here] = None
        try:
            names = sorted(n for n in os.listdir(here) if n.endswith(".py"))[:MAX_BESIDE]
        except OSError:
            names = []
        for name in names:
            try:
                with open(os.path.join(here, name), "rb") as f:
                    data = f.read(MAX_BESIDE_BYTES + 1)
                if len(data) > MAX_BESIDE_BYTES:
                    continue
                source = importlib.util.decode_source(data)
                try:
                    ast.parse(source)
                    continue                        # compiles: Python 3 (or 2 and 3) source
                except (SyntaxError, ValueError):
                    pass
                ast.parse(translate(source, os.path.join(here, name)))
            except Exception:   # noqa: BLE001 -- unreadable, not Python 2 either, or no fissix
                continue
            _beside[here] = name
            break
    found = _beside[here]
    return None if found == os.path.basename(path) else found


def _true_division(tree):
    return any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
               and any(a.name == "division" for a in node.names) for node in tree.body)


def translate(source, path, in_package=False):
    """The Python 3 source of the Python 2 ``source`` (module doc, 1 and 2; ``path`` is where
    fissix looks for sibling modules); raises whatever fissix raises."""
    key = (hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest(), path, in_package)
    if key not in _cache:
        text = expand_indentation_tabs(source)
        if not text.endswith("\n"):
            text += "\n"
        text = str(_refactoring_tool(in_package).refactor_string(text, path))
        _cache[key] = text
    return _cache[key]


def compile_python2(source, path, in_package=False):
    """The code object of the translation of ``source`` (module doc) and the list of what was
    done (short phrases for the module's WARNING line)."""
    tree = ast.parse(translate(source, path, in_package), filename=path)
    done = ["Python 2 source translated (2to3's fixers, fissix)"]
    if not _true_division(tree):
        tree = ast.fix_missing_locations(_ClassicDivision().visit(tree))
        done.append("classic integer division")
    if not _binds(tree, "round"):
        rounding = _ClassicRound()
        tree = ast.fix_missing_locations(rounding.visit(tree))
        if rounding.calls:
            done.append("Python 2's round")
    return compile(tree, path, "exec", dont_inherit=True), done
