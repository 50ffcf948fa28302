"""The in-place ``Reshape`` of older Caffe and of the forks built on it."""
from ...layers.base import register_variant
from ...layers.shape import ReshapeLayer


def _in_place(lp):
    return len(lp.top) == 1 and len(lp.bottom) == 1 and lp.top[0] == lp.bottom[0]


@register_variant("Reshape", _in_place)
class InPlaceReshapeLayer(ReshapeLayer):
    """``Reshape`` whose top is its bottom (``bottom: "x" top: "x"``): the blob itself takes the
    new shape; its data and diff stay where they are.

    Followed: happynear/caffe-windows src/caffe/layers/reshape_layer.cpp and
    mzolfaghari/ECO-efficient-video-understanding caffe_3d/src/caffe/layers/reshape_layer.cpp.
    Neither has BVLC's later ``CHECK_NE(top[0], bottom[0])`` in LayerSetUp: ``Reshape`` computes the
    shape from bottom[0] as BVLC does, calls ``top[0]->Reshape(shape)`` (which, in place, reshapes
    the bottom), then ``ShareData`` / ``ShareDiff`` (no-ops when top is bottom). Forward and
    backward do nothing: y = x, dL/dx = dL/dy, the same memory. The variant is chosen whenever
    the one top is named as the one bottom, so caffepy accepts that form in every net: BVLC
    refuses it ("Reshape Layer does not allow in-place computation"), hence no net BVLC runs
    reaches this class and BVLC's results are unchanged; only its refusal is dropped.

    The shape rule is the standard one (``reshape_param { shape { dim } axis: 0 num_axes: -1 }``;
    0 copies, one -1 is inferred). The layer before must run again before the next pass (it
    reshapes the blob back), as in those forks: every layer's ``Reshape`` runs with its forward.
    Blobs: bottom = top, any shape; after set-up it has the new shape (the same count).
    """

    def reshape(self, bottom, top):
        if top[0] is not bottom[0]:
            return ReshapeLayer.reshape(self, bottom, top)
        new = _NewShape()
        ReshapeLayer.reshape(self, bottom, [new])
        bottom[0].reshape(new.shape)

    def backward_cpu(self, top, propagate_down, bottom):
        if top[0] is not bottom[0]:
            ReshapeLayer.backward_cpu(self, top, propagate_down, bottom)
        # in place: the diff is already the bottom's


class _NewShape(object):
    """Takes the top's place while the standard shape rule runs, and records the shape."""
    shape = None

    def reshape(self, shape):
        self.shape = tuple(shape)

    def share_data(self, other):
        pass
