"""Layers of waifu2x-caffe's Caffe (lltcggie/caffe): CropCenter."""
from ...errors import ShapeError
from ...layers.base import Layer, register_layer


@register_layer("CropCenter")
class CropCenterLayer(Layer):
    """Cuts ``crop_size[a]`` entries off both ends of every axis a (lltcggie/caffe,
    src/caffe/layers/crop_center_layer.cpp).

    y = x[c_0 : S_0 - c_0, c_1 : S_1 - c_1, ...]; dL/dx is dL/dy inside that window, 0 outside.
    prototxt: ``crop_center_param { crop_size: ... }``: one (unsigned) value per bottom axis, no
    default; the fork requires 2 c_a + 1 <= S_a. Bottom: x (any shape). Top: S_a - 2 c_a on each axis.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        sizes = [int(c) for c in self.layer_param.crop_center_param.crop_size]
        shape = bottom[0].shape
        if len(sizes) != len(shape):
            raise self.error("crop_center_param has %d crop_size values for a bottom of %d axes %s; "
                             "give one per axis" % (len(sizes), len(shape), tuple(shape)), ShapeError)
        for a, (c, s) in enumerate(zip(sizes, shape)):
            if 2 * c + 1 > s:
                raise self.error("axis %d: crop_size %d leaves nothing of size %d (need 2 * %d + 1 <= %d)"
                                 % (a, c, s, c, s), ShapeError)
        self.index = tuple(slice(c, s - c) for c, s in zip(sizes, shape))
        top[0].reshape([s - 2 * c for c, s in zip(sizes, shape)])

    def forward_cpu(self, bottom, top):
        top[0].data[...] = bottom[0].data[self.index]

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = 0
            bottom[0].diff[self.index] = top[0].diff
