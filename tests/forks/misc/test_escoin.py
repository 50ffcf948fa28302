import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer

PARAM = ('convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 group: 2 '
         'weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "gaussian" std: 0.5 } }')


def test_esc_convolution_is_caffes_convolution():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 7, 6))
    esc = make_layer('type: "EscConvolution" ' + PARAM)
    conv = make_layer('type: "Convolution" ' + PARAM)
    runs = []
    for layer in (esc, conv):
        bottom, top = make_blobs([x]), make_blobs(1)
        layer.setup(bottom, top)
        runs.append((layer, bottom, top))
    for src, dst in zip(esc.blobs, conv.blobs):
        dst.data[...] = src.data + 0.25          # not what a second filling would give
        src.data[...] = dst.data
    for layer, bottom, top in runs:
        layer.forward(bottom, top)
    got, want = runs[0][2][0].data, runs[1][2][0].data
    assert got.shape == (2, 4, 4, 3)
    np.testing.assert_array_equal(got, want)


def test_esc_convolution_gradient():
    rng = np.random.default_rng(1)
    check_layer_gradient(make_layer('type: "EscConvolution" ' + PARAM),
                         make_blobs([rng.standard_normal((2, 4, 5, 5))]), make_blobs(1))
