"""``caffe.net_spec`` is ``caffepy.netspec`` (see caffe/__init__.py)."""
from caffe._alias import become

become(__name__, "caffepy.netspec")
