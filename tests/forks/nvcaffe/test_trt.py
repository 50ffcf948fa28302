"""NVCaffe's TRT layer is refused with one line naming TensorRT (forks/nvcaffe/trt.py)."""
import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import make_blobs, make_layer, run_layer


def test_trt_layer_is_refused_with_the_reason():
    layer = make_layer('type: "TRT" trt_param { trt_mode: FP16 deploy: "d.prototxt" model: "m" }')
    with pytest.raises(NetError, match=r"TensorRT engine \(trt_mode FP16\).*'d.prototxt'"):
        run_layer(layer, make_blobs([np.zeros((1, 3, 2, 2))]), make_blobs(1))
