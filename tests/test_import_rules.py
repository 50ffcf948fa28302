"""Import rules read from the source (ast): the net never imports inference mode, and inference
mode uses only caffepy.onnx's public names; importing caffepy.net does not load caffepy.infer."""
import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "caffepy")


def _modules(sub):
    """(dotted module name, path) of every module under caffepy/<sub>."""
    base = os.path.join(PKG, sub)
    for dirpath, _, files in os.walk(base):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
                if rel[-1] == "__init__":
                    rel = rel[:-1]
                yield ".".join(rel), path


def _imports(module, path):
    """[(line, imported module, [names])] of every import in the file, relative ones resolved;
    ``importlib.import_module`` / ``__import__`` calls with a constant name count too."""
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)])
                target = base + ("." + node.module if node.module else "")
            else:
                target = node.module
            names = [a.name for a in node.names]
            out.append((node.lineno, target, names))
            # ``from .. import infer`` imports the submodule
            out.extend((node.lineno, target + "." + n, []) for n in names)
        elif isinstance(node, ast.Call) and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if name in ("import_module", "__import__"):
                out.append((node.lineno, node.args[0].value, []))
    return out


def _within(target, package):
    return target == package or target.startswith(package + ".")


def test_the_net_does_not_import_inference_mode():
    found = ["%s:%d imports %s" % (os.path.relpath(path, ROOT), line, target)
             for module, path in _modules("net")
             for line, target, _ in _imports(module, path) if _within(target, "caffepy.infer")]
    assert not found, found


def test_inference_mode_uses_only_public_names_of_the_exporter():
    found = []
    for module, path in _modules("infer"):
        for line, target, names in _imports(module, path):
            if not _within(target, "caffepy.onnx"):
                continue
            private = [p for p in target.split(".") if p.startswith("_")] + \
                [n for n in names if n.startswith("_")]
            if private:
                found.append("%s:%d imports %s from %s"
                             % (os.path.relpath(path, ROOT), line, ", ".join(private), target))
    assert not found, found


def test_the_rule_sees_relative_and_private_imports(tmp_path):
    """The parser above resolves what the rules look for."""
    path = tmp_path / "mod.py"
    path.write_text("from ..infer.engine import optimize\nfrom ..onnx.export import _x\n"
                    "import importlib\nimportlib.import_module('caffepy.infer')\n")
    got = _imports("caffepy.net.mod", str(path))
    assert (1, "caffepy.infer.engine", ["optimize"]) in got
    assert (2, "caffepy.onnx.export", ["_x"]) in got
    assert (4, "caffepy.infer", []) in got


def test_importing_the_net_does_not_load_inference_mode():
    code = ("import sys, caffepy.net\n"
            "assert 'caffepy.infer' not in sys.modules, sorted(m for m in sys.modules "
            "if m.startswith('caffepy.infer'))\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=ROOT))
