"""Identity layers that only change what flows backward: GradientSilent of the domain-adaptive
Faster R-CNN (yuhuayc/da-faster-rcnn, caffe-fast-rcnn/src/caffe/layers/gradient_silent_layer.cpp
/ .cu; also JeromeMutgeert/da-faster-rcnn, He-Zhenwei/MAF) and DummyForward of SDS-RCNN
(garrickbrazil/SDS-RCNN, external/caffe/src/caffe/layers/dummy_forward.cpp; also
garrickbrazil/AR-Ped, Ricardozzf/sdsrcnn, adamtwig/segpred).
"""

from ...errors import ShapeError
from ...layers.base import Layer, NeuronLayer, register_layer


@register_layer("GradientSilent")
class GradientSilentLayer(Layer):
    """y = x; dL/dx = dL/dy where the flag (bottom[1]'s first value) is not 0, else 0. Without a
    flag bottom dL/dx = 0. This is the fork's GPU backward, the one its training runs; its CPU
    backward always writes 0 (and never reads the flag). Bottoms: x [, need_backprop flag].
    Top: x's shape.
    """
    exact_num_bottom_blobs = None
    min_bottom_blobs = 1
    max_bottom_blobs = 2
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        if len(bottom) == 2 and bottom[1].count < 1:
            raise self.error("the need_backprop bottom is empty", ShapeError)
        top[0].reshape(bottom[0].shape)

    def forward_cpu(self, bottom, top):
        top[0].data[...] = bottom[0].data

    def backward_cpu(self, top, propagate_down, bottom):
        if len(bottom) == 2 and propagate_down[1]:
            raise self.error("cannot backpropagate to the need_backprop flag")
        if propagate_down[0]:
            keep = len(bottom) == 2 and bottom[1].data.reshape(-1)[0] != 0
            bottom[0].diff[...] = top[0].diff if keep else 0

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0


@register_layer("DummyForward")
class DummyForwardLayer(NeuronLayer):
    """y = x, dL/dx = dL/dy, with one learnable blob of shape (1) that nothing reads or
    updates (the fork creates it unfilled, 0, so the layer has a parameter to share or load;
    its diff stays 0)."""

    def layer_setup(self, bottom, top):
        if not self.blobs:
            self.blobs = [self.new_blob((1,))]
        if len(self.blobs) != 1 or self.blobs[0].count != 1:
            raise self.error("DummyForward has one blob of shape (1)")
        self.param_propagate_down = [True]

    def forward_cpu(self, bottom, top):
        top[0].data[...] = bottom[0].data

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff
