import numpy as np

from caffepy.testing import make_blobs, make_layer, run_layer


def test_parse_output_and_evaluate():
    x = np.zeros((1, 3, 1, 4))
    x[0, :, 0, 0] = [0.1, 0.7, 0.2]
    x[0, :, 0, 1] = [0.5, 0.5, 0.0]
    x[0, :, 0, 2] = [0.0, 0.1, 0.9]
    x[0, :, 0, 3] = [0.3, 0.2, 0.1]
    lab, best = run_layer(make_layer('type: "ParseOutput"'), make_blobs([x]), make_blobs(2))
    np.testing.assert_allclose(lab.ravel(), [1, 0, 2, 0])
    np.testing.assert_allclose(best.ravel(), [0.7, 0.5, 0.9, 0.3])
    gt = np.array([1.0, 1.0, 255.0, 0.0]).reshape(1, 1, 1, 4)
    layer = make_layer('type: "ParseEvaluate" parse_evaluate_param { num_labels: 3 '
                       'ignore_label: 255 }')
    (counts,) = run_layer(layer, make_blobs([lab, gt]), make_blobs(1))
    np.testing.assert_allclose(counts[0, :, 0], [[1, 1, 2], [1, 2, 1], [0, 0, 0]])
