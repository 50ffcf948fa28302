"""``caffe.detector`` is ``caffepy.pycaffe.detector`` (see caffe/__init__.py)."""
from caffe._alias import become

become(__name__, "caffepy.pycaffe.detector")
