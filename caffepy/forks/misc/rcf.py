"""RCF's Caffe (yun-liu/rcf, Richer Convolutional Features for edge detection): AutoCrop."""
from ...errors import ShapeError
from ...layers.base import register_layer
from ...layers.shape import CropLayer
from ...proto.v1_crop import CoordMapError, crop_offsets


@register_layer("AutoCrop")
class AutoCropLayer(CropLayer):
    """Crops bottom 0 to bottom 1's H x W at an offset the net's coordinate maps give
    (yun-liu/rcf, src/caffe/layers/auto_crop_layer.cpp): HED / RCF's side outputs, upsampled by a
    Deconvolution, cut back to the input image.

    Offset: at set-up, walk back from bottom 0 along first bottoms, then from bottom 1 until that
    path is met; compose each layer's affine map ``y = a x + b`` per spatial axis from the meeting
    blob to each bottom (m0, m1); ``m1 . m0^-1`` must be ``y = x - c`` with whole c >= 0 on H
    and W (:func:`caffepy.proto.v1_crop.crop_offsets`, which also gives the FCN-era V1 CROP its
    offsets; RCF's maps take dilated kernels by their extent).
    y[n, c, h, w] = x[n, c, h + c_h, w + c_w] for h < H1, w < W1; dL/dx is dL/dy in that window
    and 0 elsewhere; bottom 1 gives only its shape.
    prototxt: no parameters (``type: "AutoCrop"`` with two bottoms). Bottoms: x (N, C, H0, W0),
    reference (any N', C', H1, W1). Top: (N, C, H1, W1).
    """
    type = "AutoCrop"
    exact_num_bottom_blobs = 2
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        net = self.net
        if net is None:
            raise self.error("finds its crop offset from the net it is in; build it in a Net")
        index = next((i for i, layer in enumerate(net.layers) if layer is self), len(net.layers))
        layers = list(net.net_param.layer[:index]) + [self.layer_param]
        try:
            self.offsets = crop_offsets(layers, len(layers) - 1, dilation=True)
        except CoordMapError as e:
            raise self.error(str(e))

    def reshape(self, bottom, top):
        x, ref = bottom[0].shape, bottom[1].shape
        if len(x) != 4 or len(ref) != 4:
            raise self.error("bottoms must have 4 axes (N, C, H, W), got %s and %s" % (x, ref),
                             ShapeError)
        index = [slice(None), slice(None)]
        for a, c in zip((2, 3), self.offsets):
            if c + ref[a] > x[a]:
                raise self.error("axis %d: offset %d + crop size %d exceeds the bottom size %d"
                                 % (a, c, ref[a], x[a]), ShapeError)
            index.append(slice(c, c + ref[a]))
        self.index = tuple(index)
        top[0].reshape(x[:2] + ref[2:])
