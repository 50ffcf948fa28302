"""No module reads a FieldDescriptor's ``label`` directly.

protobuf 7 removed ``FieldDescriptor.label`` (and left ``LABEL_*`` only on the descriptor_pb2
message ``FieldDescriptorProto``, whose ``label`` is an ordinary proto field). Reading it on a
FieldDescriptor works on protobuf 4 and raises AttributeError on 7, the default install's, in code
paths the tests may not reach. ``caffepy.proto.is_repeated`` / ``field_label`` read it on both.

The check parses every Python file of the package, the tools and the tests and flags each use of
``LABEL_OPTIONAL`` / ``LABEL_REQUIRED`` / ``LABEL_REPEATED`` whose owner is not
``FieldDescriptorProto`` (spelled out, or a module-level name bound to it), outside
caffepy/proto/__init__.py, where the two helpers live.
"""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LABELS = {"LABEL_OPTIONAL", "LABEL_REQUIRED", "LABEL_REPEATED"}
ALLOWED = {os.path.join("caffepy", "proto", "__init__.py")}


def _sources():
    for top in ("caffepy", "tools", "tests", "caffe", "benchmarks"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith(".py") and not name.endswith("_pb2.py"):
                    yield os.path.join(folder, name)


def _proto_aliases(tree):
    """Module-level names bound to ``...FieldDescriptorProto``."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "FieldDescriptorProto":
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        if isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names if a.name == "FieldDescriptorProto")
    return names


def label_reads(path):
    """(line, text) of each ``X.LABEL_*`` whose X is not FieldDescriptorProto."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    tree = ast.parse(text, path)
    aliases = _proto_aliases(tree) | {"FieldDescriptorProto"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in LABELS:
            owner = node.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
            if name not in aliases:
                found.append((node.lineno, ast.get_source_segment(text, node)))
    return found


def test_checker_flags_a_field_descriptor_label():
    tree_text = "def f(fd):\n    return fd.label == fd.LABEL_REPEATED\n"
    tree = ast.parse(tree_text)
    hits = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in LABELS]
    assert hits and getattr(hits[0].value, "id", None) == "fd"


@pytest.mark.slow
def test_no_module_reads_field_descriptor_label(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from google.protobuf import descriptor_pb2\n"
                      "_FDP = descriptor_pb2.FieldDescriptorProto\n"
                      "def ok(p):\n    return p.label == _FDP.LABEL_REPEATED\n"
                      "def bad(fd):\n    return fd.label == fd.LABEL_REPEATED\n")
    assert [line for line, _ in label_reads(str(sample))] == [6]
    offenders = []
    for path in _sources():
        rel = os.path.relpath(path, ROOT)
        if rel in ALLOWED:
            continue
        offenders += ["%s:%d: %s" % (rel, line, seg) for line, seg in label_reads(path)]
    assert not offenders, "use caffepy.proto.is_repeated / field_label:\n" + "\n".join(offenders)


def test_helpers_answer_on_this_protobuf():
    from caffepy.proto import caffe_pb2, field_label, is_repeated
    fields = caffe_pb2.NetParameter.DESCRIPTOR.fields_by_name
    assert is_repeated(fields["layer"]) and field_label(fields["layer"]) == "repeated"
    assert not is_repeated(fields["name"]) and field_label(fields["name"]) == "optional"
    if int(pytest.importorskip("google.protobuf").__version__.split(".")[0]) >= 7:
        assert not hasattr(fields["layer"], "label")
