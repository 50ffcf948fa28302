"""Temporal segment networks' caffe (yjxiong/caffe): ``Gather``.

Its ``SegData`` reader (``seg_data_param``) has no caffepy reader; ``caffepy.zoo`` swaps it for
an input (batch 1, H and W floored to ``transform_param.stride``, as the fork's first image).
"""
from ...layers.base import Layer, register_layer


@register_layer("Gather")
class GatherLayer(Layer):
    """Top i = bottom i, for every i (the fork's layer outside MPI mode: tops share the bottoms'
    data and diff, forward and backward do nothing).

    In the fork's MPI mode each top is the all-gather of bottom i over the R ranks (batch x R) and
    backward scatters the diff back times R; caffepy's distributed solvers exchange gradients
    themselves and never run a net under the fork's MPI mode, so that branch is not reproduced.
    prototxt: no parameters. Bottoms: any k >= 1 blobs; tops: k blobs of the same shapes.
    """
    min_bottom_blobs = 1
    equal_num_bottom_top_blobs = True

    def reshape(self, bottom, top):
        for b, t in zip(bottom, top):
            t.reshape(b.shape)

    def forward_cpu(self, bottom, top):
        for b, t in zip(bottom, top):
            t.data[...] = b.data

    def backward_cpu(self, top, propagate_down, bottom):
        for b, t, down in zip(bottom, top, propagate_down):
            if down:
                b.diff[...] = t.diff
