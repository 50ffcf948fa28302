import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer

WORDVEC = ('type: "Wordvec" wordvec_param { dimension: 3 vocab_size: 5 '
           'weight_filler { type: "gaussian" std: 1 } }')


def test_wordvec_looks_up_rows_and_overwrites_the_weight_diff():
    words = np.array([[1.0], [4.4], [1.6], [0.0]])         # int(x + 0.5): 1, 4, 2, 0
    layer = make_layer(WORDVEC)
    bottom, top = make_blobs([words]), make_blobs(1)
    (y,) = run_layer(layer, bottom, top)
    w = layer.blobs[0].data.reshape(5, 3)
    np.testing.assert_array_equal(y, w[[1, 4, 2, 0]])
    layer.blobs[0].diff[...] = 9.0
    top[0].diff[...] = np.arange(12.0).reshape(4, 3)
    layer.backward(top, [False], bottom)
    ref = np.zeros((5, 3))
    for row, word in enumerate([1, 4, 2, 0]):
        ref[word] += top[0].diff[row]
    np.testing.assert_array_equal(layer.blobs[0].diff.reshape(5, 3), ref)
    check_layer_gradient(make_layer(WORDVEC), make_blobs([words]), make_blobs(1),
                         check_bottom=[])
    with pytest.raises(NetError, match="vocab_size"):
        run_layer(make_layer(WORDVEC), make_blobs([words + 5]), make_blobs(1))


def test_cap_sequence_takes_each_items_last_step():
    rng = np.random.default_rng(0)
    steps = [rng.standard_normal((3, 2)) for _ in range(4)]
    text = ('type: "CapSequence" rp { cap_sequence_param { sequence_lengths: 2 '
            'sequence_lengths: 0 sequence_lengths: 3 } }')
    (y,) = run_layer(make_layer(text), make_blobs(steps), make_blobs(1))
    np.testing.assert_array_equal(y, [steps[2][0], steps[0][1], steps[3][2]])
    check_layer_gradient(make_layer(text), make_blobs(steps), make_blobs(1))


def test_py_holds_its_parameters_only():
    text = ('type: "Py" py_param { param_shapes { dimension: 2 dimension: 3 } '
            'param_fillers { type: "constant" value: 0.5 } }')
    layer = make_layer(text)
    x = np.ones((2, 2))
    bottom, top = make_blobs([x]), make_blobs(1)
    layer.setup(bottom, top)
    layer.forward(bottom, top)
    assert len(layer.blobs) == 1 and np.all(layer.blobs[0].data == 0.5)
    assert top[0].shape == ()
