"""Layers that make blobs from nothing or consume them: Input, DummyData, Parameter, Silence."""
from ..fillers import GaussianFiller, gaussian_float32, get_filler
from ..proto import caffe_pb2
from .base import Layer, register_layer


def _shape(blob_shape):
    return tuple(int(d) for d in blob_shape.dim)


@register_layer("Input")
class InputLayer(Layer):
    """The net's inputs: tops shaped at setup, filled by the user (pycaffe ``net.blobs[...]``).

    prototxt: ``input_param { shape { dim: N dim: C ... } }`` given once per top, once for all
    tops, or not at all (then the tops stay unshaped until the user reshapes them).
    No bottoms; at least one top. Forward and backward do nothing; reshape keeps user shapes.
    """
    exact_num_bottom_blobs = 0
    min_top_blobs = 1

    def layer_setup(self, bottom, top):
        shapes = self.layer_param.input_param.shape
        if len(shapes) not in (0, 1, len(top)):
            raise self.error("input_param.shape must be given 0, 1 or %d (one per top) times, got %d"
                             % (len(top), len(shapes)))
        for i, t in enumerate(top):
            if shapes:
                t.reshape(_shape(shapes[0 if len(shapes) == 1 else i]))

    def reshape(self, bottom, top):
        pass

    def forward_cpu(self, bottom, top):
        pass

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("DummyData")
class DummyDataLayer(Layer):
    """Tops filled by fillers: constant fillers once at setup, the others at every forward (a
    dense gaussian by :func:`caffepy.fillers.gaussian_float32`, the same values in any dtype).

    prototxt: ``dummy_data_param { data_filler {...} shape { dim: ... } }`` with data_filler given
    0 times (constant 0), once (for all tops) or once per top; the shape either as ``shape``
    (once or once per top) or the legacy ``num`` / ``channels`` / ``height`` / ``width`` (each once
    or once per top), never both. No bottoms; at least one top.
    """
    exact_num_bottom_blobs = 0
    min_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.dummy_data_param
        n = len(top)
        if len(p.data_filler) not in (0, 1, n):
            raise self.error("data_filler must be given 0, 1 or %d (one per top) times, got %d"
                             % (n, len(p.data_filler)))
        legacy = [p.num, p.channels, p.height, p.width]
        if any(len(f) for f in legacy):
            if len(p.shape):
                raise self.error("both shape and legacy num/channels/height/width were given")
            for name, f in zip(("num", "channels", "height", "width"), legacy):
                if len(f) not in (1, n):
                    raise self.error("'%s' must be given once or once per top (%d), got %d"
                                     % (name, n, len(f)))
            shapes = [tuple(int(f[0 if len(f) == 1 else i]) for f in legacy) for i in range(n)]
        else:
            if len(p.shape) not in (1, n):
                raise self.error("shape must be given once or once per top (%d), got %d"
                                 % (n, len(p.shape)))
            shapes = [_shape(p.shape[0 if len(p.shape) == 1 else i]) for i in range(n)]
        if len(p.data_filler):
            params = [p.data_filler[0 if len(p.data_filler) == 1 else i] for i in range(n)]
        else:
            zero = caffe_pb2.FillerParameter(type="constant", value=0)
            params = [zero] * n
        self.fillers = [get_filler(fp) for fp in params]
        self.refill = [fp.type != "constant" for fp in params]
        for t, shape, filler, refill in zip(top, shapes, self.fillers, self.refill):
            t.reshape(shape)
            if t.count and not refill:
                filler.fill(t)

    def reshape(self, bottom, top):
        pass

    def forward_cpu(self, bottom, top):
        for t, filler, refill in zip(top, self.fillers, self.refill):
            if not (refill and t.count):
                continue
            p = filler.param
            if type(filler) is GaussianFiller and p.sparse == -1:
                # drawn at every forward: the float32 draw of gaussian_float32, any blob dtype
                t.data[...] = gaussian_float32(t.count, p.mean, p.std).reshape(t.shape)
            else:
                filler.fill(t)

    def backward_cpu(self, top, propagate_down, bottom):
        pass


@register_layer("Parameter")
class ParameterLayer(Layer):
    """Exposes a learned blob as its top: y = W (shares W's data); dL/dW += dL/dy.

    prototxt: ``parameter_param { shape { dim: ... } }``. No bottoms, one top. Param blob 0 has
    the given shape, initialised to zeros (set it from a .caffemodel or a solver).
    """
    exact_num_bottom_blobs = 0
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        shape = _shape(self.layer_param.parameter_param.shape)
        if not self.blobs:
            self.blobs = [self.new_blob(shape)]
        elif self.blobs[0].shape != shape:
            raise self.error("parameter blob has shape %s; parameter_param.shape is %s"
                             % (self.blobs[0].shape, shape))
        self.param_propagate_down = [True]

    def reshape(self, bottom, top):
        top[0].reshape(self.blobs[0].shape)
        top[0].share_data(self.blobs[0])

    def forward_cpu(self, bottom, top):
        top[0].share_data(self.blobs[0])

    def backward_cpu(self, top, propagate_down, bottom):
        if self.param_propagate_down and self.param_propagate_down[0]:
            self.blobs[0].diff[...] += top[0].diff


@register_layer("Silence")
class SilenceLayer(Layer):
    """Consumes bottoms so that they are not net outputs. No tops; backward writes zero diffs.

    prototxt: no parameters. At least one bottom.
    """
    min_bottom_blobs = 1
    exact_num_top_blobs = 0

    def reshape(self, bottom, top):
        pass

    def forward_cpu(self, bottom, top):
        pass

    def backward_cpu(self, top, propagate_down, bottom):
        for b, down in zip(bottom, propagate_down):
            if down:
                b.diff[...] = 0
