"""``caffe.proto`` is ``caffepy.proto`` and ``caffe.proto.caffe_pb2`` is ``caffepy.proto.caffe_pb2``:
one set of message classes, the proto file registered once (see caffe/__init__.py)."""
from caffe._alias import become

become(__name__ + ".caffe_pb2", "caffepy.proto.caffe_pb2")
become(__name__, "caffepy.proto")
