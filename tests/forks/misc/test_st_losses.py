import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_power_file_adds_the_shift_read_from_text(tmp_path):
    path = tmp_path / "shift.txt"
    path.write_text("1.5 -2\n3 x 7\n")
    text = 'type: "PowerFile" power_file_param { shift_file: "%s" }' % path
    x = np.arange(2 * 5, dtype=float).reshape(2, 5, 1, 1)
    (y,) = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    np.testing.assert_array_equal(y.reshape(2, 5), x.reshape(2, 5) + [1.5, -2, 3, 0, 0])
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1))
    missing = 'type: "PowerFile" power_file_param { shift_file: "%s" }' % (tmp_path / "no")
    with pytest.raises(CaffeError, match="cannot read shift_file"):
        run_layer(make_layer(missing), make_blobs([x]), make_blobs(1))


def _loc_ref(x, t):
    loss = 0.0
    for v in x.ravel():                        # the fork's kernel, one thread per value
        if v < -t:
            loss += (v + t) * (v + t) / 2
        elif v > t:
            loss += (v - t) * (v - t) / 2
    return loss / x.size


def test_loc_loss_matches_the_kernel_and_gradient():
    x = np.random.default_rng(0).uniform(-2, 2, (3, 6))
    text = 'type: "LocLoss" loc_loss_param { threshold: 0.7 }'
    (loss,) = run_layer(make_layer(text), make_blobs([x]), make_blobs(1))
    np.testing.assert_allclose(loss, _loc_ref(x, 0.7), rtol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([x]), make_blobs(1), kink=0.7,
                         kink_range=2e-3)


def _st_ref(theta, h, w):
    loss = 0.0
    for i in range(len(theta)):
        for s in range(h):
            for t in range(w):
                u, v = s * 2.0 / h - 1, t * 2.0 / w - 1
                for z in (theta[i, 0] * u + theta[i, 1] * v + theta[i, 2],
                          theta[i, 3] * u + theta[i, 4] * v + theta[i, 5]):
                    if z < -1:
                        loss += (z + 1) ** 2 / 2
                    elif z > 1:
                        loss += (z - 1) ** 2 / 2
    return loss / (len(theta) * h * w)


def test_st_loss_matches_the_kernel_and_gradient():
    theta = np.array([[1.3, 0.2, 0.1, -0.1, 0.9, -0.4], [0.5, 0.0, 0.0, 0.0, 0.5, 0.0]])
    text = 'type: "STLoss" st_loss_param { output_H: 3 output_W: 5 }'
    (loss,) = run_layer(make_layer(text), make_blobs([theta]), make_blobs(1))
    assert loss > 0
    np.testing.assert_allclose(loss, _st_ref(theta, 3, 5), rtol=1e-12)
    check_layer_gradient(make_layer(text), make_blobs([theta]), make_blobs(1))
