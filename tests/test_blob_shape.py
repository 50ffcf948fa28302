"""Blob and ShapeBlob take and check shapes the same way (blob._checked_shape)."""
import pytest

from caffepy.blob import Blob, ShapeBlob
from caffepy.errors import CaffeError


@pytest.mark.parametrize("cls", [Blob, ShapeBlob])
def test_reshape_forms_and_checks(cls):
    b = cls((2, 3))
    b.reshape(4, 5)
    assert b.shape == (4, 5)
    b.reshape([1, 2, 3])
    assert b.shape == (1, 2, 3) and b.count == 6
    with pytest.raises(CaffeError, match="negative dimension"):
        b.reshape(2, -1)
    with pytest.raises(CaffeError, match="33 axes; at most 32"):
        b.reshape((1,) * 33)
    assert b.shape == (1, 2, 3)


def test_shape_blob_allocates_only_when_read():
    b = ShapeBlob((1000, 1000, 100))
    b.reshape(2, 3)
    assert not b.allocated
    assert b.data.shape == (2, 3) and b.allocated
