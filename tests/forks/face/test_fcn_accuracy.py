import numpy as np

from caffepy.testing import make_blobs, make_layer, run_layer


def test_fcn_accuracy_groups_and_the_forks_label_index():
    x = np.zeros((6, 2, 3, 3))
    lab = np.zeros((6, 2, 3, 3))
    x[1, 1, 2, 0] = 5          # group 0 (images 0-2): peak on its middle image
    x[3, 0, 0, 1] = 5          # group 1 (images 3-5): peak on image 3, not the middle one
    x[5, 0, 1, 1] = 1          # (an incomplete 3rd group would not count: none here)
    lab[1, 1, 2, 0] = 1
    top = run_layer(make_layer('type: "FCNAccuracy" accuracy_param { top_k: 3 }'),
                    make_blobs([x, lab]), make_blobs(2))
    assert top[0] == 0.5 and top[1].shape == (2,)
    # group 1 with its peak on the middle image 4: judged by image 1's labels (the fork's n % k)
    x[3] = 0
    x[4, 1, 2, 0] = 9
    top = run_layer(make_layer('type: "FCNAccuracy" accuracy_param { top_k: 3 }'),
                    make_blobs([x, lab]), make_blobs(1))
    assert top[0] == 1.0
    one = run_layer(make_layer('type: "FCNAccuracy"'), make_blobs([x[:2], lab[:2]]),
                    make_blobs(1))
    assert one[0] == 0.0          # top_k 1: image 1's peak read from image 0's labels
    assert np.isnan(run_layer(make_layer('type: "FCNAccuracy" accuracy_param { top_k: 7 }'),
                              make_blobs([x, lab]), make_blobs(1))[0])
