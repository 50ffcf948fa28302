import numpy as np

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_gradient_silent_passes_the_gradient_only_when_flagged():
    x = np.random.default_rng(0).standard_normal((2, 3))
    for flag, scale in ((1.0, 1.0), (0.0, 0.0)):
        layer, bottom, top = make_layer('type: "GradientSilent"'), make_blobs([x, [flag]]), \
            make_blobs(1)
        np.testing.assert_array_equal(run_layer(layer, bottom, top)[0], x)
        top[0].diff[...] = 3.0
        layer.backward(top, [True, False], bottom)
        np.testing.assert_array_equal(bottom[0].diff, np.full(x.shape, 3.0 * scale))
    check_layer_gradient(make_layer('type: "GradientSilent"'), make_blobs([x, [1.0]]),
                         make_blobs(1), check_bottom=[0])
    layer, bottom, top = make_layer('type: "GradientSilent"'), make_blobs([x]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1
    bottom[0].diff[...] = 5
    layer.backward(top, [True], bottom)
    assert not bottom[0].diff.any()


def test_dummy_forward_is_identity_with_an_idle_blob():
    x = np.random.default_rng(1).standard_normal((2, 3, 2))
    layer = make_layer('type: "DummyForward"')
    (y,) = run_layer(layer, make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y, x)
    assert layer.blobs[0].shape == (1,) and layer.blobs[0].data[0] == 0
    check_layer_gradient(make_layer('type: "DummyForward"'), make_blobs([x]), make_blobs(1))
