"""RandomNoise: pulkitag/caffe's additive Gaussian noise layer
(src/caffe/layers/random_noise_layer.cpp, include/caffe/layers/random_noise_layer.hpp;
src/my_tests/proto_files/random_noise_net.prototxt).
"""
import numpy as np

from ...layers.base import NeuronLayer, register_layer


@register_layer("RandomNoise")
class RandomNoiseLayer(NeuronLayer):
    """y = x + z, a fresh draw of z for every element at every forward (in every phase):

        z ~ N(mu, sigma)                                      (adaptive_sigma false)
        z ~ N(0, adaptive_factor |x|), or N(0, adaptive_factor mean|x|) where x = 0
                                                              (adaptive_sigma true)
        dL/dx = dL/dy

    The gradient passes straight through, as the fork's Backward_cpu copies the top diff: with
    ``adaptive_sigma`` the dependence of z's scale on x is not differentiated. This is the fork's
    CPU forward; its GPU forward differs (it draws N(mu, 1) and, without adaptive_sigma, never
    scales by sigma). A standard deviation of 0 or less is refused, as the fork's
    caffe_rng_gaussian refuses it (a non-adaptive sigma at setup; with adaptive_sigma, an
    all-zero bottom, at the forward).

    prototxt: ``random_noise_param { mu (0) sigma (1) adaptive_sigma (false)
    adaptive_factor (0.1) }``. One bottom, one top of its shape; not in place (the fork checks).
    """

    def layer_setup(self, bottom, top):
        if top[0] is bottom[0]:
            raise self.error("does not allow in-place computation")
        p = self.layer_param.random_noise_param
        self.mu, self.sigma = float(p.mu), float(p.sigma)
        self.adaptive, self.factor = bool(p.adaptive_sigma), float(p.adaptive_factor)
        if not self.adaptive and not self.sigma > 0:
            raise self.error("sigma must be positive, got %g" % self.sigma)

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        z = self.rng().standard_normal(x.shape)
        if self.adaptive:
            scale = self.factor * np.abs(x.astype(np.float64))
            zero = scale == 0
            if zero.any():
                avg = self.factor * float(np.abs(x).sum(dtype=np.float64)) / max(x.size, 1)
                if not avg > 0:
                    raise self.error("the noise's standard deviation is 0 (adaptive_sigma on a "
                                     "bottom of zeros)")
                scale[zero] = avg
            if not (scale > 0).all():
                raise self.error("the noise's standard deviation must be positive (adaptive_factor "
                                 "%g)" % self.factor)
            z = z * scale
        else:
            z = self.mu + self.sigma * z
        top[0].data[...] = x + z

    def backward_cpu(self, top, propagate_down, bottom):
        if propagate_down[0]:
            bottom[0].diff[...] = top[0].diff
