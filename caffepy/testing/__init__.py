"""Test support: the one gradient checker and helpers that make a layer test 5-15 lines."""
from .gradient_check import GradientChecker, check_layer_gradient  # noqa: F401
from .layer_case import make_layer, make_blobs, run_layer  # noqa: F401
