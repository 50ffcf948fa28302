"""caffepy.zoo's shapes for MSCNN / Cascade R-CNN data layers, and a small train / test net of
theirs built in both phases (caffepy.zoo.summary)."""
import numpy as np
from google.protobuf import text_format

from caffepy import zoo
from caffepy.proto import caffe_pb2
from caffepy.zoo.summary import summarize

NET = """
name: "tiny_mscnn"
layer { name: "data" type: "ImageGtData" top: "data" top: "label_a" top: "gt_boxes"
  include { phase: TRAIN }
  image_gt_data_param { source: "w.txt" batch_size: 2 resize_width: 96 resize_height: 64
    crop_width: 48 crop_height: 32 downsample_rate: 8 field_w: 16 field_h: 16
    output_gt_boxes: true } }
layer { name: "data" type: "EvalData" top: "data" top: "gt_boxes" top: "image_sizes"
  include { phase: TEST }
  eval_data_param { source: "t.txt" batch_size: 1 short_size: 40 long_size: 56 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 6 kernel_size: 3 stride: 8 pad: 1 } }
layer { name: "loss" type: "DetectionLoss" bottom: "conv" bottom: "label_a" top: "loss"
  include { phase: TRAIN }
  detection_loss_param { cls_num: 2 field_w: 16 field_h: 16 downsample_rate: 8 } }
layer { name: "acc" type: "DetectionAccuracy" bottom: "conv" bottom: "label_a" top: "acc"
  include { phase: TRAIN }
  detection_accuracy_param { cls_num: 2 field_w: 16 field_h: 16 downsample_rate: 8 } }
layer { name: "sil" type: "Silence" bottom: "gt_boxes" }
"""


def _shapes(text):
    net = caffe_pb2.NetParameter()
    text_format.Parse(text, net)
    out = zoo.replace_data_layers(net)
    return {lp.name + str(i): [tuple(s.dim) for s in lp.input_param.shape]
            for i, lp in enumerate(out.layer) if lp.type == "Input"}


def test_zoo_shapes_follow_the_forks_setup():
    s = _shapes(NET)
    assert s["data0"] == [(2, 3, 32, 48), (2, 6, 4, 6), (1, 7, 1, 1)]   # crop, /8, gt rows
    assert s["data1"] == [(1, 3, 56, 40), (1, 8, 1, 1), (1, 2, 1, 1)]   # short = W, long = H
    det = _shapes('layer { name: "d" type: "DetectionData" top: "data" top: "l1" top: "l2" '
                  'detection_data_param { batch_size: 4 short_size: 600 long_size: 1000 '
                  'crop_width: 512 crop_height: 512 stride: 16 stride: 32 field_w: 1 field_w: 2 '
                  'field_h: 1 field_h: 2 } }')
    assert det["d0"] == [(4, 3, 512, 512), (4, 6, 32, 32), (4, 6, 16, 16)]
    assert zoo.is_data_layer(caffe_pb2.LayerParameter(type="DetectionData"))


def test_tiny_mscnn_net_builds_in_both_phases(tmp_path):
    path = tmp_path / "trainval.prototxt"
    path.write_text(NET)
    for phase in (caffe_pb2.TRAIN, caffe_pb2.TEST):
        assert summarize(str(path), phase=phase) is not None


def test_tiny_mscnn_train_step_runs():
    from caffepy.net import Net
    net_param = caffe_pb2.NetParameter()
    text_format.Parse(NET, net_param)
    net = Net(zoo.replace_data_layers(net_param), phase=caffe_pb2.TRAIN)
    rng = np.random.default_rng(0)
    lab = np.zeros((2, 6, 4, 6))
    lab[:, 0, 1, 2] = 1                                  # one object per image at cell (1, 2)
    lab[:, 1:5, 1, 2] = [20, 12, 16, 16]
    out = net.forward(data=rng.standard_normal((2, 3, 32, 48)), label_a=lab,
                      gt_boxes=np.zeros((1, 7, 1, 1)))
    assert np.isfinite(out["loss"]).all() and out["loss"].ravel()[0] > 0
    assert -1 <= out["acc"].ravel()[0] <= 1
    net.backward()
    assert np.abs(net.params["conv"][0].diff).sum() > 0
