"""Classifier (oversampled and centre-crop predictions) and Detector (windows, context pad)."""
import numpy as np
import pytest

import caffepy as caffe
from caffepy.errors import CaffeError
from tests.pycaffe.nets import write

NET = """name: 'tiny'
layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 3 dim: 3 dim: 6 dim: 6 } } }
layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv'
  convolution_param { num_output: 2 kernel_size: 3 weight_filler { type: 'gaussian' std: 0.5 } } }
layer { name: 'fc' type: 'InnerProduct' bottom: 'conv' top: 'fc'
  inner_product_param { num_output: 4 weight_filler { type: 'gaussian' std: 0.5 } } }
layer { name: 'prob' type: 'Softmax' bottom: 'fc' top: 'prob' }
"""


@pytest.fixture
def files(tmp_path):
    caffe.set_random_seed(5)
    proto = write(tmp_path, "deploy.prototxt", NET)
    weights = str(tmp_path / "w.caffemodel")
    caffe.Net(proto, caffe.TEST).save(weights)
    return proto, weights


def test_classifier_predicts_oversampled_and_center(files):
    proto, weights = files
    clf = caffe.Classifier(proto, weights, image_dims=(8, 8), mean=np.array([0.5, 0.5, 0.5]),
                           raw_scale=1.0, channel_swap=(2, 1, 0))
    images = [np.random.default_rng(i).random((10, 12, 3)).astype(np.float32) for i in range(4)]
    probs = clf.predict(images)
    assert probs.shape == (4, 4)
    np.testing.assert_allclose(probs.sum(axis=1), 1, rtol=1e-5)
    center = clf.predict(images, oversample=False)
    assert center.shape == (4, 4)
    crop = caffe.io.resize_image(images[0], (8, 8))[1:7, 1:7]
    net = caffe.Net(proto, weights, caffe.TEST)
    x = clf.transformer.preprocess("data", crop)
    net.blobs["data"].data[...] = x
    np.testing.assert_allclose(center[0], net.forward()["prob"][0], rtol=1e-5)


def test_detector_windows(files, tmp_path):
    Image = pytest.importorskip("PIL.Image")
    proto, weights = files
    path = str(tmp_path / "im.png")
    Image.fromarray((np.random.default_rng(0).random((20, 30, 3)) * 255).astype(np.uint8)).save(path)
    det = caffe.Detector(proto, weights, mean=np.array([0.4, 0.5, 0.6]), raw_scale=1.0)
    windows = [(0, 0, 10, 10), (5, 5, 20, 30), (2, 3, 8, 9), (0, 0, 20, 30)]
    out = det.detect_windows([(path, windows)])
    assert len(out) == 4 and out[1]["window"] == windows[1] and out[1]["filename"] == path
    assert out[0]["prediction"].shape == (4,)
    padded = caffe.Detector(proto, weights, mean=np.array([0.4, 0.5, 0.6]), context_pad=1)
    image = caffe.io.load_image(path)
    crop = padded.crop(image, np.array([0, 0, 10, 10]))
    assert crop.shape[0] > 10 and np.allclose(crop[0, 0], [0.4, 0.5, 0.6])
    with pytest.raises(CaffeError, match="selective_search"):
        det.detect_selective_search([path])
