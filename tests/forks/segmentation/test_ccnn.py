import numpy as np

from caffepy.proto import caffe_pb2
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def _pack_reference(x, sh, sw):
    """The fork's pack_cpu loops, transcribed."""
    n, c, h, w = x.shape
    oh, ow = (h - 1) // sh + 1, (w - 1) // sw + 1
    out = np.zeros(sh * sw * n * c * oh * ow)
    o = 0
    for y in range(sh):
        for xx in range(sw):
            for b in range(n):
                for ch in range(c):
                    for j in range(oh):
                        for i in range(ow):
                            if j * sh + y < h and i * sw + xx < w:
                                out[o] = x[b, ch, j * sh + y, i * sw + xx]
                            o += 1
    return out.reshape(sh * sw * n, c, oh, ow)


def test_repack_pack_and_unpack():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 7))
    pack = 'type: "Repack" repack_param { stride_h: 2 stride_w: 3 }'
    (p,) = run_layer(make_layer(pack), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(p, _pack_reference(x, 2, 3))
    check_layer_gradient(make_layer(pack), make_blobs([x]), make_blobs(1))
    unpack = 'type: "Repack" repack_param { operation: UNPACK_IMAGE stride_h: 2 stride_w: 3 }'
    (u,) = run_layer(make_layer(unpack), make_blobs([p]), make_blobs(1))
    assert u.shape == (2, 3, 6, 9)
    np.testing.assert_array_equal(u[:, :, :5, :7], x)
    check_layer_gradient(make_layer(unpack), make_blobs([p]), make_blobs(1))
    q = rng.standard_normal((9, 2, 3, 3))             # 9 = 2 x 4 + 1: the last item unread
    check_layer_gradient(make_layer(unpack.replace("stride_h: 2 stride_w: 3", "stride: 2")),
                         make_blobs([q]), make_blobs(1))


def test_ccnn_running_average_accumulates_the_batch_sum():
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((3, 2, 2, 2)) for _ in range(3)]
    layer = make_layer('type: "RunningAverage" running_average_param { alpha: 0.5 '
                       'initial_value: 1 }')
    bottom, top = make_blobs([xs[0]]), make_blobs(1)
    layer.setup(bottom, top)
    a = np.ones((1, 2, 2, 2))
    for x in xs:
        bottom[0].data[...] = x
        layer.forward(bottom, top)
        a = 0.5 * a + x.sum(axis=0, keepdims=True)
        np.testing.assert_allclose(top[0].data, a)
    top[0].diff[...] = rng.standard_normal(a.shape)
    layer.backward(top, [True], bottom)
    np.testing.assert_array_equal(bottom[0].diff, np.broadcast_to(top[0].diff, (3, 2, 2, 2)))


def test_dbnet_running_mean_in_parameter_blobs():
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((2, 3)) for _ in range(3)]
    text = ('type: "RunningAverage" bottom: "a" bottom: "b" running_average_param { mass: 3 '
            'update_test: false }')
    for phase, updates in ((caffe_pb2.TRAIN, True), (caffe_pb2.TEST, False)):
        layer = make_layer(text, phase=phase)
        bottom, top = make_blobs([xs[0], -xs[0]]), make_blobs(2)
        layer.setup(bottom, top)
        m, w, d = np.zeros((2, 3)), 0.0, 0.75
        for x in xs:
            bottom[0].data[...], bottom[1].data[...] = x, -x
            layer.forward(bottom, top)
            if updates:
                m = (m * w * d + x) / (w * d + 1)
                w = w * d + 1
            np.testing.assert_allclose(top[0].data, m)
            np.testing.assert_allclose(top[1].data, -m)
        assert len(layer.blobs) == 3 and layer.blobs[2].data.reshape(-1)[0] == w
