"""``caffe.coord_map`` is ``caffepy.pycaffe.coord_map`` (see caffe/__init__.py)."""
from caffe._alias import become

become(__name__, "caffepy.pycaffe.coord_map")
