"""The Pooling of the darknet2caffe Caffe (ChenYingpeng/darknet2caffe, ChenYingpeng/caffe-yolov3).

darknet's maxpool of size 2 stride 1 (yolov3-tiny's sixth) keeps 13 x 13: its windows are
[i, i + 2), the last one cut by the image. BVLC's Pooling with ``kernel_size: 2 stride: 1 pad: 0``
gives 12 x 12, and the route (Concat) of the two scales no longer fits. The converter's README has
its users replace BVLC's ``src/caffe/layers/pooling_layer.cpp`` with its own
(``caffe_layers/pooling_layer/``, "only work for yolov3-tiny, use with caution"), which adds one
output row and column when ``(kernel_h - stride_h) % 2 == 1``; the extra window is clipped to the
image like any ceil-rounded one, so for size 2 stride 1 that is darknet's maxpool exactly. The
fork's schema has no field for it.

caffepy keeps BVLC's Pooling and takes this variant for the layers that converter writes: a
Pooling named ``layer<N>-maxpool`` (its name for a darknet maxpool block that has no name of its
own; its nets are named "Darkent2Caffe"). Its later converter writes ``kernel_size: size + 1`` and ``pad: (size + 1) / 2``
for odd ``size - stride`` instead, to which the rule adds nothing.
"""
import re

from ...layers.base import register_variant
from ...layers.pooling import PoolingLayer

_CONVERTER_NAME = re.compile(r"layer\d+-maxpool\Z")


def _is_converter_pool(lp):
    return bool(_CONVERTER_NAME.match(lp.name)) and not lp.pooling_param.global_pooling


@register_variant("Pooling", _is_converter_pool)
class Darknet2CaffePoolingLayer(PoolingLayer):
    """BVLC's Pooling with one more output per spatial axis when ``kernel_h - stride_h`` is odd
    and positive (ChenYingpeng/darknet2caffe, caffe_layers/pooling_layer/pooling_layer.cpp).

    PH = ceil((H + 2 pad - kernel_h) / stride_h) + 1 + g, PW likewise + g, with
    g = 1 if (kernel_h - stride_h) is odd and positive else 0 (the fork tests the height's
    kernel and stride for both axes); then BVLC's check (pad > 0 and the last window starting at
    or past H + pad: PH -= 1). Windows are BVLC's, clipped to the image: MAX of kernel 2 stride 1
    on H gives y[i] = max(x[i], x[i + 1]) for i < H - 1 and y[H - 1] = x[H - 1]. Backward as
    BVLC's Pooling.
    prototxt: BVLC's ``pooling_param``; chosen for a Pooling layer named ``layer<N>-maxpool``
    (not global). Blobs: bottom (N, C, H, W) -> top (N, C, PH, PW) [, MAX mask].
    """

    def output_growth(self, kernel):
        d = kernel[0] - self.stride[0]
        g = 1 if d > 0 and d % 2 == 1 else 0
        return (g, g)
