"""The Caffe schema (generated ``caffe_pb2``) and reading / writing / upgrading its files."""
from . import caffe_pb2  # noqa: F401
