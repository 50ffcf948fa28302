"""southatsouth/GLAD's one-bottom Crop (caffe/src/caffe/layers/crop_layer.cpp of the Caffe in that
repository): the crop size comes from ``crop_param`` instead of a reference bottom."""
from ...errors import ShapeError
from ...layers.base import register_variant
from ...layers.shape import CropLayer


@register_variant("Crop", lambda lp: len(lp.bottom) == 1)
class SizedCropLayer(CropLayer):
    """Crop of one bottom to a size given in ``crop_param`` (southatsouth/GLAD):

        y = x[..., o_a : o_a + s_a, ...] for each axis a >= ``axis``, s_2 = ``height`` and every
        other cropped axis s_a = ``weight`` (the fork's spelling of the width);

    offsets and the backward (dL/dy inside the window, 0 elsewhere) as Caffe's two-bottom Crop.
    prototxt: ``crop_param { axis: 2 offset: [none, one for all, or one per cropped axis]
    height: 0 weight: 0 }`` (both read by the fork; a cropped axis of size 0 is refused here).
    Bottom: x; top: the crop.
    """
    exact_num_bottom_blobs = 1

    def crop_shape(self, bottom, start):
        p = self.layer_param.crop_param
        x = bottom[0].shape
        shape = [x[a] if a < start else int(p.height) if a == 2 else int(p.weight)
                 for a in range(len(x))]
        if min(shape[start:]) <= 0:
            raise self.error("crop_param.height / weight give the crop size, got %s for %s"
                             % (tuple(shape), x), ShapeError)
        return shape
