"""ColorConv, the colour-space layer of the colorization Caffe (split-brain autoencoders,
richzhang/splitbrainauto's in-prototxt BGR -> Lab; the same layer and color_conv_param in
XiaohangZhan/mix-and-match's caffe/, src/caffe/layers/color_conv_layer.cpp / .cu)."""
import numpy as np

from ...errors import ShapeError
from ...layers.base import Layer, register_layer

_RGB_TO_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375],
                        [0.2126729, 0.7151522, 0.0721750],
                        [0.0193339, 0.1191920, 0.9503041]])
_XYZ_TO_RGB = np.array([[3.2404542, -1.5371385, -0.4985314],
                        [-0.9692660, 1.8760108, 0.0415560],
                        [0.0556434, -0.2040259, 1.0572252]])
_WHITE = np.array([0.95074, 1.0, 1.08883])       # the fork's D65 reference white


def _channels(m, x):
    """m (k x 3) applied to the channel axis of x (N, 3, H, W): (N, k, H, W)."""
    return np.einsum("ij,njhw->nihw", m.astype(x.dtype), x)


def _per_channel(v, x):
    return np.asarray(v, dtype=x.dtype).reshape(1, 3, 1, 1)


def _rgb_to_xyz(x):
    v = x / 255.0
    linear = np.where(v <= 0.04045, v / 12.92, ((np.maximum(v, 0.04045) + 0.055) / 1.055) ** 2.4)
    return _channels(_RGB_TO_XYZ, linear)


def _xyz_to_rgb(x):
    v = _channels(_XYZ_TO_RGB, x)
    encoded = np.where(v <= 0.0031308, v * 12.92,
                       1.055 * np.maximum(v, 0.0031308) ** (1 / 2.4) - 0.055)
    return encoded * 255.0


def _xyz_to_lab(x):
    t = x / _per_channel(_WHITE, x)
    f = np.where(t > 0.008867, np.cbrt(t), (903.3 * t + 16.0) / 116.0)
    return np.stack([116.0 * f[:, 1] - 16.0, 500.0 * (f[:, 0] - f[:, 1]),
                     200.0 * (f[:, 1] - f[:, 2])], axis=1)


def _lab_to_xyz(x):
    fy = (x[:, 0] + 16.0) / 116.0
    f = np.stack([fy + x[:, 1] / 500.0, fy, fy - x[:, 2] / 200.0], axis=1)
    return np.where(f > 0.206896, f ** 3, (116.0 * f - 16.0) / 903.3) * _per_channel(_WHITE, x)


def _rgb_to_gray(x):
    return _channels(_RGB_TO_XYZ[1:2], x)


#: (input, output) -> conversion, by ColorSpace name; BGR is RGB with its channels reversed.
_CONVERSIONS = {
    ("Gray", "RGB"): lambda x: np.repeat(x, 3, axis=1),
    ("RGB", "Gray"): _rgb_to_gray,
    ("RGB", "RGB"): lambda x: x,
    ("RGB", "XYZ"): _rgb_to_xyz,
    ("XYZ", "RGB"): _xyz_to_rgb,
    ("XYZ", "Lab"): _xyz_to_lab,
    ("Lab", "XYZ"): _lab_to_xyz,
    ("RGB", "Lab"): lambda x: _xyz_to_lab(_rgb_to_xyz(x)),
    ("Lab", "RGB"): lambda x: _xyz_to_rgb(_lab_to_xyz(x)),
}


@register_layer("ColorConv")
class ColorConvLayer(Layer):
    """Converts images between colour spaces, per pixel (the colorization Caffe's ColorConv).

    RGB and BGR are sRGB scaled 0..255 (BGR: channels reversed), Gray 0..255, XYZ and Lab on
    their CIE scales. With v = RGB / 255, the fork's constants:
    RGB -> XYZ: lin(v) = v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055)^2.4, XYZ = M lin
    (M: sRGB's D65 matrix, row Y = 0.2126729 R + 0.7151522 G + 0.0721750 B);
    XYZ -> RGB: u = M^-1 XYZ (the fork's rounded inverse), RGB = 255 (12.92 u if u <= 0.0031308
    else 1.055 u^(1/2.4) - 0.055), not clipped;
    XYZ -> Lab: t = XYZ / (0.95074, 1.0, 1.08883), f(t) = t^(1/3) if t > 0.008867 else
    (903.3 t + 16) / 116; L = 116 f_Y - 16, a = 500 (f_X - f_Y), b = 200 (f_Y - f_Z);
    Lab -> XYZ: f_Y = (L + 16) / 116, f_X = f_Y + a / 500, f_Z = f_Y - b / 200, XYZ = white *
    (f^3 if f > 0.206896 else (116 f - 16) / 903.3);
    RGB -> Lab and Lab -> RGB through XYZ; RGB -> Gray = the Y row on the 0..255 values (no
    linearisation); Gray -> RGB repeats the plane. Pairs the fork has: Gray -> RGB,
    RGB -> Gray / RGB / XYZ / Lab, XYZ -> RGB / Lab, Lab -> RGB / XYZ (RGB meaning RGB or BGR on
    either side); any other pair is refused (the fork leaves the top unwritten). Every image is
    converted (the fork's GPU forward; its CPU forward returns after the first image).
    No backward (the fork's is NOT_IMPLEMENTED): its users set ``propagate_down: false``.
    prototxt: ``color_conv_param { input: BGR output: BGR }`` (ColorSpace BGR = 0, RGB = 1,
    XYZ = 2, Lab = 3, Gray = 5; both default BGR).
    Bottom (N, 1 if input is Gray else 3, H, W) -> top (N, 1 if output is Gray else 3, H, W).
    """
    exact_num_bottom_blobs = 1
    exact_num_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.color_conv_param
        space = type(p).ColorSpace.Name
        self.input, self.output = space(p.input), space(p.output)
        key = tuple("RGB" if s == "BGR" else s for s in (self.input, self.output))
        if key not in _CONVERSIONS:
            raise self.error("color_conv_param converts Gray -> RGB / BGR, RGB / BGR -> Gray, RGB, "
                             "BGR, XYZ or Lab, XYZ -> RGB, BGR or Lab, Lab -> RGB, BGR or XYZ; "
                             "not %s -> %s" % (self.input, self.output))
        self.convert = _CONVERSIONS[key]

    def reshape(self, bottom, top):
        shape = bottom[0].shape
        want = 1 if self.input == "Gray" else 3
        if len(shape) != 4 or shape[1] != want:
            raise self.error("input %s needs images of %d channel(s) (N, %d, H, W), got %s"
                             % (self.input, want, want, tuple(shape)), ShapeError)
        top[0].reshape((shape[0], 1 if self.output == "Gray" else 3) + tuple(shape[2:]))

    def forward_cpu(self, bottom, top):
        x = bottom[0].data
        if self.input == "BGR":
            x = x[:, ::-1]
        y = self.convert(x)
        top[0].data[...] = y[:, ::-1] if self.output == "BGR" else y
