"""``caffe.coord_map`` is ``caffepy.coord_map`` (see caffe/__init__.py)."""
from caffe._alias import become

become(__name__, "caffepy.coord_map")
