"""``caffe.classifier`` is ``caffepy.classifier`` (see caffe/__init__.py)."""
from caffe._alias import become

become(__name__, "caffepy.classifier")
