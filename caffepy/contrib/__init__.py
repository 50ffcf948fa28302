"""Implementations of well-known third-party layers that are not part of Caffe itself.

``caffepy.contrib.frcnn``: py-faster-rcnn's Python layers (RPN proposals and training targets).
"""
