import numpy as np
import pytest

from caffepy.errors import NetError
from caffepy.testing import make_blobs, make_layer

from ..nets import forward, train_step
from .test_segnet import _write_png
from ..video.test_data import run_data_layer


def test_image_seg_data_pads_crops_and_reports_dims(tmp_path):
    rng = np.random.default_rng(7)
    img = rng.integers(0, 256, (3, 5, 3), dtype=np.uint8)
    seg = rng.integers(0, 4, (3, 5, 1), dtype=np.uint8)
    _write_png(tmp_path / "a.png", img)
    _write_png(tmp_path / "a_seg.png", seg)
    (tmp_path / "list.txt").write_text("a.png a_seg.png\n")
    text = ('type: "ImageSegData" top: "data" top: "label" top: "data_dim" image_data_param { '
            'source: "%s" root_folder: "%s/" batch_size: 1 label_type: PIXEL ignore_label: 255 } '
            'transform_param { crop_size: 6 mean_value: 1 mean_value: 2 mean_value: 3 }'
            % (tmp_path / "list.txt", tmp_path))
    data, label, dims = run_data_layer(text, tops=3)
    # padded at the bottom / right with the mean (image) and 255 (label) to 6 x 6, centre crop = all
    want = np.full((3, 6, 6), 0.0)
    want[:, :3, :5] = img.transpose(2, 0, 1) - np.array([1, 2, 3])[:, None, None]
    np.testing.assert_allclose(data[0], want)
    lab = np.full((6, 6), 255.0)
    lab[:3, :5] = seg[:, :, 0]
    np.testing.assert_array_equal(label[0, 0], lab)
    np.testing.assert_array_equal(dims.reshape(-1), [3, 5])
    (tmp_path / "cls.txt").write_text("a.png 2\n")
    _, label, _ = run_data_layer(text.replace("list.txt", "cls.txt").replace("PIXEL", "IMAGE"),
                                 tops=3)
    assert set(np.unique(label)) == {2.0, 255.0}
    with pytest.raises(NetError, match="mean_file"):
        make_layer(text.replace("crop_size: 6", 'mean_file: "m.binaryproto"')).setup(
            [], make_blobs(3))


# DeepLab v2 (ASPP) train/test facts: ImageSegData with label_type PIXEL and a data_dim top,
# dilated convolutions in four ASPP branches summed by Eltwise, the label shrunk by Interp
# (shrink_factor 8 there; 4 here), SoftmaxWithLoss with ignore_label 255, and at test time the
# scores zoomed back up with Interp.
DEEPLAB = """
name: "deeplab-aspp-mini"
layer { name: "data" type: "ImageSegData" top: "data" top: "label" top: "data_dim"
  image_data_param { source: "train.txt" label_type: PIXEL batch_size: 2 shuffle: true }
  transform_param { mean_value: 104.008 mean_value: 116.669 mean_value: 122.675 crop_size: 17 mirror: true } }
layer { name: "silence" type: "Silence" bottom: "data_dim" }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 stride: 2 weight_filler { type: "msra" } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "fc8_1" type: "Convolution" bottom: "pool1" top: "fc8_1"
  convolution_param { num_output: 3 kernel_size: 3 dilation: 1 pad: 1 weight_filler { type: "msra" } } }
layer { name: "fc8_2" type: "Convolution" bottom: "pool1" top: "fc8_2"
  convolution_param { num_output: 3 kernel_size: 3 dilation: 2 pad: 2 weight_filler { type: "msra" } } }
layer { name: "fc8" type: "Eltwise" bottom: "fc8_1" bottom: "fc8_2" top: "fc8"
  eltwise_param { operation: SUM } }
layer { name: "label_shrink" type: "Interp" bottom: "label" top: "label_shrink"
  interp_param { shrink_factor: 4 pad_beg: 0 pad_end: 0 } include { phase: TRAIN } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc8" bottom: "label_shrink" top: "loss"
  loss_param { ignore_label: 255 } include { phase: TRAIN } }
layer { name: "fc8_interp" type: "Interp" bottom: "fc8" top: "fc8_interp"
  interp_param { zoom_factor: 4 } include { phase: TEST } }
"""


def test_deeplab_forward_and_train_step():
    net = forward(DEEPLAB, labels=3)
    assert net.blobs["fc8"].shape == (1, 3, 5, 5)
    assert net.blobs["fc8_interp"].shape == (1, 3, 17, 17)
    train_step(DEEPLAB, labels=3)
