"""The Caffe schema (generated ``caffe_pb2``) and reading / writing / upgrading its files.

``field_label`` / ``is_repeated`` read a FieldDescriptor's label on every supported protobuf:
4.x has ``label``; 7.x removed it in favour of ``is_repeated`` / ``is_required``.
"""
from . import caffe_pb2  # noqa: F401


def is_repeated(field):
    """Whether a FieldDescriptor is ``repeated``."""
    label = getattr(field, "label", None)
    if label is not None:
        return label == field.LABEL_REPEATED
    return bool(field.is_repeated)


def field_label(field):
    """``"optional"``, ``"required"`` or ``"repeated"`` for a FieldDescriptor."""
    label = getattr(field, "label", None)
    if label is not None:
        return {field.LABEL_OPTIONAL: "optional", field.LABEL_REQUIRED: "required",
                field.LABEL_REPEATED: "repeated"}[label]
    if field.is_repeated:
        return "repeated"
    return "required" if field.is_required else "optional"
