"""``caffe.io`` is ``caffepy.io`` (see caffe/__init__.py)."""
from caffe._alias import become

become(__name__, "caffepy.io")
