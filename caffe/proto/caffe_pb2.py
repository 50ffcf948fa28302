"""``caffe.proto.caffe_pb2`` is ``caffepy.proto.caffe_pb2`` (see caffe/__init__.py)."""
from caffe._alias import become

become(__name__, "caffepy.proto.caffe_pb2")
