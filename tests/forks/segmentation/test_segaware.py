import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

FAR = np.float32(np.finfo(np.float32).max / 100)


def _im2dist_reference(x, k, pad, stride, dil, l2, remove_center, remove_bounds):
    """The fork's im2dist_cpu and dist2im_cpu loops (square geometry), for one image; the
    backward with top_diff = dy."""
    c, h, w = x.shape
    ho = (h + 2 * pad - (dil * (k - 1) + 1)) // stride + 1
    wo = (w + 2 * pad - (dil * (k - 1) + 1)) // stride + 1
    top = np.zeros((k * k, ho, wo))
    diff = np.zeros((c * k * k, ho, wo))
    for cc in range(c * k * k):
        wof, hof, ci = cc % k, (cc // k) % k, cc // k // k
        for i in range(ho):
            for j in range(wo):
                hi, wi = i * stride - pad + hof * dil, j * stride - pad + wof * dil
                ch, cw = i * stride - pad + (k // 2) * dil, j * stride - pad + (k // 2) * dil
                if 0 <= ch < h and 0 <= cw < w:
                    if remove_center and hi == ch and wi == cw:
                        diff[cc, i, j] = 0
                        top[cc % (k * k), i, j] = FAR
                    elif 0 <= hi < h and 0 <= wi < w:
                        diff[cc, i, j] = x[ci, ch, cw] - x[ci, hi, wi]
                        top[cc % (k * k), i, j] += (diff[cc, i, j] ** 2 * 0.5 if l2
                                                    else abs(diff[cc, i, j]))
                    elif remove_bounds:
                        top[cc % (k * k), i, j] = FAR
    return top, diff, (ho, wo)


def _dist2im_reference(dy, diff, x_shape, k, pad, stride, dil, l2):
    c, h, w = x_shape
    dx = np.zeros(x_shape)
    ho, wo = dy.shape[1:]
    for cc in range(c * k * k):
        wof, hof, ci = cc % k, (cc // k) % k, cc // k // k
        for i in range(ho):
            for j in range(wo):
                hi, wi = i * stride - pad + hof * dil, j * stride - pad + wof * dil
                ch, cw = i * stride - pad + (k // 2) * dil, j * stride - pad + (k // 2) * dil
                if 0 <= ch < h and 0 <= cw < w and not (hi == ch and wi == cw):
                    g = (diff[cc, i, j] if l2 else 1 - 2 * (diff[cc, i, j] <= 0)) \
                        * dy[cc % (k * k), i, j]
                    dx[ci, ch, cw] += g
                    if 0 <= hi < h and 0 <= wi < w:
                        dx[ci, hi, wi] -= g
    return dx


def test_im2dist_matches_the_forks_loops():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 5, 6))
    for norm, l2 in (("L2", True), ("L1", False)):
        for rc, rb in ((False, False), (True, True)):
            for k, pad, stride, dil in ((3, 1, 1, 1), (3, 2, 2, 2)):
                text = ('type: "Im2dist" convolution_param { kernel_size: %d pad: %d stride: %d '
                        'dilation: %d } im2dist_param { norm: %s remove_center: %s '
                        'remove_bounds: %s }' % (k, pad, stride, dil, norm, str(rc).lower(),
                                                 str(rb).lower()))
                layer, bottom, top = make_layer(text), make_blobs([x]), make_blobs(1)
                (y,) = run_layer(layer, bottom, top)
                dy = rng.standard_normal(y.shape)
                top[0].diff[...] = dy
                layer.backward(top, [True], bottom)
                for n in range(2):
                    ref, diff, _ = _im2dist_reference(x[n], k, pad, stride, dil, l2, rc, rb)
                    np.testing.assert_allclose(y[n], ref, rtol=1e-12)
                    np.testing.assert_allclose(
                        bottom[0].diff[n],
                        _dist2im_reference(dy[n], diff, x.shape[1:], k, pad, stride, dil, l2),
                        rtol=1e-10, atol=1e-12)


def test_im2dist_l2_gradient():
    x = np.random.default_rng(1).standard_normal((1, 2, 4, 5))
    text = 'type: "Im2dist" convolution_param { kernel_size: 3 pad: 1 dilation: 1 }'
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))
