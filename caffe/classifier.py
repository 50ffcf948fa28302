"""``caffe.classifier`` is ``caffepy.pycaffe.classifier`` (see caffe/__init__.py)."""
from caffe._alias import become

become(__name__, "caffepy.pycaffe.classifier")
