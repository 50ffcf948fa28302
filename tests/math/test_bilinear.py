"""caffepy.math.bilinear: the shared bilinear read of ROI / deformable fork layers."""
import numpy as np

from caffepy.math import bilinear


def test_corners_inside_and_on_the_last_row():
    assert bilinear.corners(1.25, 2.5, 4, 5) == (1, 2, 2, 3, 1.25, 2.5)
    # on or past the last row / column: that row, no high neighbour, coordinate clamped
    assert bilinear.corners(3.0, 4.7, 4, 5) == (3, 3, 4, 4, 3.0, 4.0)
    assert bilinear.corners(3.9, 0.0, 4, 5) == (3, 3, 0, 1, 3.0, 0.0)


def test_sample_matches_the_four_corner_formula():
    img = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    y, x = 1.25, 2.5
    ly, lx = 0.25, 0.5
    want = ((1 - ly) * (1 - lx) * img[:, 1, 2] + (1 - ly) * lx * img[:, 1, 3]
            + ly * (1 - lx) * img[:, 2, 2] + ly * lx * img[:, 2, 3])
    assert np.array_equal(bilinear.sample(img, y, x), want)
    # integer points read the pixel; the last row and column have no high neighbour
    assert np.allclose(bilinear.sample(img, 2.0, 1.0), img[:, 2, 1])
    assert np.allclose(bilinear.sample(img, 3.6, 4.2), img[:, 3, 4])
