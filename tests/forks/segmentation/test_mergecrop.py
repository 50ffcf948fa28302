import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

TEXT = 'type: "MergeCrop" mergecrop_param { operation: STACK %s }'


def test_stack_with_the_centre_crop_3d():
    """A 3-D U-Net skip: bottom a (2, 3, 2, 3, 4) stacked with the centre crop of b (2, 3, 5,
    6, 8): pad (5-2)/2 = 1, (6-3)/2 = 1, (8-4)/2 = 2."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 2, 3, 4)), rng.standard_normal((2, 3, 5, 6, 8))
    (y,) = run_layer(make_layer(TEXT % ""), make_blobs([a, b], np.float64),
                     make_blobs(1, np.float64))
    np.testing.assert_array_equal(y, np.concatenate([a, b[:, :, 1:3, 1:4, 2:6]], axis=1))


def test_channels_mapped_as_the_fork_kernel_maps_them():
    """With Ca != Cb the fork's kernel takes top channel t of image n from (t div Ca) mod 2 and
    channel (n (Ca + Cb) + t) mod C of that bottom (not the plain stack)."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 1, 3, 3)), rng.standard_normal((2, 3, 5, 5))
    (y,) = run_layer(make_layer(TEXT % ""), make_blobs([a, b], np.float64),
                     make_blobs(1, np.float64))
    bc = b[:, :, 1:4, 1:4]
    for n in range(2):
        for t in range(4):
            g = n * 4 + t
            ref = a[n, 0] if (t // 1) % 2 == 0 else bc[n, g % 3]
            np.testing.assert_array_equal(y[n, t], ref)


def test_forward_flags_zero_a_part():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((1, 2, 2, 2)), rng.standard_normal((1, 2, 4, 4))
    (y,) = run_layer(make_layer(TEXT % "forward: true forward: false"),
                     make_blobs([a, b], np.float64), make_blobs(1, np.float64))
    np.testing.assert_array_equal(y[:, :2], a)
    assert not y[:, 2:].any()


@pytest.mark.parametrize("flags", ["backward: true backward: true", ""])
def test_gradient(flags):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 2, 3, 2)), rng.standard_normal((2, 2, 5, 4))
    check = [0, 1] if flags else [0]
    check_layer_gradient(make_layer(TEXT % flags), make_blobs([a, b]), make_blobs(1),
                         check_bottom=check)


def test_a_smaller_second_bottom_is_refused():
    layer = make_layer(TEXT % "")
    with pytest.raises(NetError, match="must be at least as large as bottom 0"):
        layer.setup(make_blobs([np.zeros((1, 1, 4, 4)), np.zeros((1, 1, 3, 3))]), make_blobs(1))


def test_nd_memory_data():
    """The OpenCL branch's MemoryData with ``dim``: the data top has that shape, the optional
    label (N, 1, ..., 1); batches cycle through what reset gave."""
    layer = make_layer('type: "MemoryData" top: "data" memory_data_param { dim: 2 dim: 1 dim: 3 '
                       'dim: 4 dim: 5 }')
    data = np.arange(4 * 60, dtype=np.float32).reshape(4, 1, 3, 4, 5)
    tops = make_blobs(1)
    layer.setup([], tops)
    assert tops[0].shape == (2, 1, 3, 4, 5)
    layer.reset(data)
    layer.forward([], tops)
    layer.forward([], tops)
    np.testing.assert_array_equal(tops[0].data, data[2:])
    labelled = make_layer('type: "MemoryData" top: "data" top: "label" memory_data_param { '
                          'dim: 2 dim: 1 dim: 3 dim: 4 dim: 5 }')
    tops = make_blobs(2)
    labelled.setup([], tops)
    assert tops[1].shape == (2, 1, 1, 1, 1)
    with pytest.raises(NetError, match="needs labels"):
        labelled.reset(data)
    labelled.reset(data, np.arange(4.0))
    labelled.forward([], tops)
    np.testing.assert_array_equal(tops[1].data.reshape(-1), [0, 1])
