"""The contextual-action (R*CNN) layers of the caffe-fast-rcnn that
liyantett/Joint-Local-and-Global-Information-Learning-with-Single-Apex-Frame-Detection-for-Micro-
expression-Re ships: MIL (caffe-fast-rcnn/src/caffe/layers/mil_layer.cpp) and Sum
(src/caffe/layers/sum_layer.cpp and .cu).

MIL: the best of each primary region's context boxes. The bottom holds R x n rows of C scores,
the n = ``context_per_roi`` context boxes of region r in rows r n .. r n + n - 1:
    y[r, k] = max_j x[r n + j, k]                              top (R, C, 1, 1)
    dx[r n + j, k] = dy[r, k] [x[r n + j, k] == y[r, k]]       (every tied maximum gets dy)
prototxt: ``mil_param { context_per_roi: n }``. Refused: no or zero context_per_roi (the image-level
MIL of other forks, ``type: MAX / NOR`` over positions, is another layer), ``type: NOR``, a bottom
with more than C values per row, or a row count that is not a multiple of n (the fork leaves the
remaining rows out of both passes).

Sum: y = sum_i x_i over any number of bottoms of equal count and equal legacy C, H, W (a 2-D
N x C bottom matches an N x C x 1 x 1 one); top shaped as the first; dx_i = dy.
"""
from ...errors import ShapeError
from ...layers.base import Layer, register_layer
from ...proto import caffe_pb2


@register_layer("MIL")
class MILLayer(Layer):
    __doc__ = __doc__.split("Sum:")[0]
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.mil_param
        if not p.context_per_roi:
            raise self.error("mil_param.context_per_roi is required (a positive number of context "
                             "boxes per region; the image-level MIL is not implemented)")
        if p.type == caffe_pb2.MILParameter.NOR:
            raise self.error("mil_param.type NOR is not supported (the context MIL takes the max)")
        self.n = int(p.context_per_roi)

    def reshape(self, bottom, top):
        x = bottom[0]
        if x.num_axes < 2 or x.count_range(1) != x.shape[1]:
            raise self.error("the bottom must be rows x C (x 1 x 1), got %s" % (x.shape,),
                             ShapeError)
        if x.shape[0] % self.n:
            raise self.error("%d rows are not a multiple of context_per_roi %d"
                             % (x.shape[0], self.n), ShapeError)
        self.r, self.c = x.shape[0] // self.n, x.shape[1]
        top[0].reshape((self.r, self.c, 1, 1))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data.reshape(self.r, self.n, self.c)
        top[0].data.reshape(self.r, self.c)[...] = x.max(axis=1)

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            x = bottom[0].data.reshape(self.r, self.n, self.c)
            y = top[0].data.reshape(self.r, 1, self.c)
            dy = top[0].diff.reshape(self.r, 1, self.c)
            bottom[0].diff.reshape(self.r, self.n, self.c)[...] = dy * (x == y)


def _legacy(shape):
    """Caffe's num / channels / height / width of a blob of at most 4 axes."""
    return tuple(shape) + (1,) * (4 - len(shape))


@register_layer("Sum")
class SumLayer(Layer):
    __doc__ = "R*CNN's " + __doc__[__doc__.index("Sum:"):]
    min_bottom_blobs = 1
    exact_num_top_blobs = 1

    def reshape(self, bottom, top):
        first = bottom[0]
        for b in bottom[1:]:
            if (b.count != first.count or b.num_axes > 4 or first.num_axes > 4
                    or _legacy(b.shape)[1:] != _legacy(first.shape)[1:]):
                raise self.error("bottoms must be the same size: %s and %s"
                                 % (first.shape, b.shape), ShapeError)
        top[0].reshape(first.shape)

    def forward_cpu(self, bottom, top):
        out = bottom[0].data.copy()
        for b in bottom[1:]:
            out += b.data.reshape(out.shape)
        top[0].data[...] = out

    def backward_cpu(self, top, propagate_down, bottom):
        for b, down in zip(bottom, propagate_down):
            if down:
                b.diff[...] = top[0].diff.reshape(b.shape)
