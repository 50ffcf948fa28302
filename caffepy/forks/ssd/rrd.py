"""RRD's Extend (MhLiao/RRD, Rotation-sensitive Regression Detector: src/caffe/layers/
extend_layer.cpp / .cu): the input image repeated once per orientation channel, for the
Oriented Response Network convolutions that follow it."""
from ...errors import NetError, ShapeError
from ...layers.base import Layer, register_layer


@register_layer("Extend")
class ExtendLayer(Layer):
    """Repeats every channel ``orientations`` times, consecutively (RRD's Extend).

    y[n, c * O + k, h, w] = x[n, c, h, w] for k = 0 .. O-1, O = ``orn_param.orientations``
    (numpy: ``np.repeat(x, O, axis=1)``).
    prototxt: ``orn_param { orientations: 8 }`` (the schema's default is 1; the fork refuses
    O <= 1). Bottom (N, C, H, W), 4 axes -> top (N, C * O, H, W).
    No backward (the fork's Backward is empty and writes no gradient): RRD puts it on the data.
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        self.orientations = int(self.layer_param.orn_param.orientations)
        if self.orientations <= 1:
            raise self.error("orn_param.orientations should be greater than 1, got %d"
                             % self.orientations, NetError)

    def reshape(self, bottom, top):
        shape = tuple(bottom[0].shape)
        if len(shape) != 4:
            raise self.error("the bottom must be N x C x H x W, got %s" % (shape,), ShapeError)
        top[0].reshape((shape[0], shape[1] * self.orientations) + shape[2:])

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        top[0].data[...] = x.repeat(self.orientations, axis=1)
