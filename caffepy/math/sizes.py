"""Output sizes of convolution, deconvolution and pooling windows, in BVLC Caffe's arithmetic.

Convolution (``ConvolutionLayer::compute_output_shape``, and ``im2col_cpu`` / ``im2col_gpu``):

    O = (S + 2 pad - E) / stride + 1,    E = dilation (kernel - 1) + 1

with C++ ``int`` division, which truncates toward zero: when the dilated kernel overhangs the
padded input by less than the stride (-stride < S + 2 pad - E < 0) Caffe gets O = 1, and im2col
reads zeros for the taps outside [0, S). Deconvolution: O = stride (S - 1) + E - 2 pad (no
division). Pooling (``PoolingLayer::Reshape``): ``static_cast<int>(ceil(float(S + 2 pad - k) /
stride)) + 1`` (``floor`` with ``round_mode: FLOOR``) -- mathematical ceil / floor of the ratio,
so a negative ratio above -1 rounds to 0 under ceil and to -1 under floor -- then, when either
axis is padded, one less on an axis whose last window would start at or past S + pad.
"""


def _trunc_div(a, b):
    """C++ ``a / b`` for ints (b > 0): the quotient rounded toward zero."""
    q = abs(a) // b
    return q if a >= 0 else -q


def conv_out_size(size, kernel, pad, stride, dilation=1):
    """One axis of a convolution's output (may be 0 or negative: the caller refuses it)."""
    return _trunc_div(size + 2 * pad - (dilation * (kernel - 1) + 1), stride) + 1


def conv_out_shape(spatial, kernel, pad, stride, dilation):
    """Output spatial shape of a convolution (per-axis sequences)."""
    return tuple(conv_out_size(s, k, p, st, d)
                 for s, k, p, st, d in zip(spatial, kernel, pad, stride, dilation))


def deconv_out_shape(spatial, kernel, pad, stride, dilation):
    """Output spatial shape of a deconvolution: stride (S - 1) + E - 2 pad per axis."""
    return tuple(st * (s - 1) + d * (k - 1) + 1 - 2 * p
                 for s, k, p, st, d in zip(spatial, kernel, pad, stride, dilation))


def pooled_size(size, kernel, stride, pad, ceil=True, grow=0, clip=None):
    """One axis of a pooling output: ceil (or floor) rounding, then the last window must start
    in the image or the top/left padding: ``if clip and (pooled - 1) * stride >= size + pad:
    pooled -= 1``. ``clip``: whether that check applies (default: this axis is padded, as the
    N-d poolings of the forks do; BVLC's 2-d layer checks both axes when either is padded, see
    :func:`pooled_shape`). ``grow``: outputs a fork's pooling adds before the check."""
    span = size + 2 * pad - kernel
    pooled = (-(-span // stride) if ceil else span // stride) + 1 + grow
    if (pad if clip is None else clip) and (pooled - 1) * stride >= size + pad:
        pooled -= 1
    return pooled


def pooled_shape(spatial, kernel, stride, pad, ceil=True, grow=None):
    """BVLC's 2-d pooling output (``PoolingLayer::Reshape``): :func:`pooled_size` per axis, the
    last-window check on every axis when any axis is padded (``if (pad_h_ || pad_w_)``)."""
    grow = grow or (0,) * len(spatial)
    clip = any(pad)
    return tuple(pooled_size(s, k, st, p, ceil, g, clip)
                 for s, k, st, p, g in zip(spatial, kernel, stride, pad, grow))


def overhang(size, kernel, pad, stride, dilation, out):
    """How far the last of ``out`` windows reaches past the padded input (S + 2 pad), or 0: the
    extra trailing zeros a padded buffer needs so that every window lies inside it."""
    return max(0, (out - 1) * stride + dilation * (kernel - 1) + 1 - (size + 2 * pad))


def overhangs(spatial, kernel, pad, stride, dilation, out_shape):
    return tuple(overhang(s, k, p, st, d, o) for s, k, p, st, d, o in
                 zip(spatial, kernel, pad, stride, dilation, out_shape))
