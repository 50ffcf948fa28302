"""Put a caffepy module into ``sys.modules`` under its pycaffe name (see caffe/__init__.py)."""
import importlib
import sys


def become(name, target):
    """Make ``import <name>`` return the module ``target``: the import system hands back whatever
    ``sys.modules[name]`` holds once the importing file has run."""
    module = importlib.import_module(target)
    sys.modules[name] = module
    return module
