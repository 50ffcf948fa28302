"""ENet's Python layer ``spatial_dropout.SpatialDropoutLayer`` (TimoSaemann/caffe-enet,
``python/spatial_dropout.py``), used by every ENet train and deploy file.

``param_str``: a dict ``{'phase': 'TRAIN' | 'TEST', 'p': '0.01'}`` (its own phase, not the net's),
0 < p < 1; s = 1 / (1 - p). Bottom x (N x C x ...), top y (same shape).

- phase TRAIN: a keep mask m[n, c] ~ Bernoulli(1 - p) per feature map; y = x * m * s,
  dx = dy * m * s.
- any other phase: y = x * s, dx = dy * s (the fork scales at test time too; its deploy files
  carry the TEST phase, and ENet's BN-absorbing script folds the scale into the weights).
"""
from ... import common
from ...layers.python_layer import Layer
from ..detection.frcnn.boxes import parse_param_str


class SpatialDropoutLayer(Layer):
    """See module doc."""

    def setup(self, bottom, top):
        if len(bottom) != 1 or len(top) != 1:
            raise ValueError("SpatialDropoutLayer takes one bottom and one top, got %d and %d"
                             % (len(bottom), len(top)))
        params = parse_param_str(self.param_str)
        self.train = str(params.get("phase", "TEST")) == "TRAIN"
        self.p = float(params.get("p", "nan"))
        if not 0 < self.p < 1:
            raise ValueError("SpatialDropoutLayer: p must be in (0, 1), got %r" % params.get("p"))
        self.scale = 1.0 / (1.0 - self.p)

    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)

    def forward(self, bottom, top):
        x = bottom[0].data
        if self.train:
            keep = common.rng().random(x.shape[:2]) >= self.p
            self.factor = (keep * self.scale).reshape(x.shape[:2] + (1,) * (x.ndim - 2))
        else:
            self.factor = self.scale
        top[0].data[...] = x * self.factor

    def backward(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff * self.factor
