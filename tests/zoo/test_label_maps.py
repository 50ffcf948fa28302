"""Segmentation labels a data layer reads from its source: the input-size search gives them the
map layout when a layer that needs a map rejects the label vector it guessed first."""
import caffepy
from caffepy.zoo.summary import summarize

# DeepLab's train net in small: a reader of images and label maps, a score map at 1/4 of the
# image, the label shrunk to the score's size by Interp (nearest would do; DeepLab uses Interp)
DEEPLAB = """layer { name: "data" type: "Data" top: "data" top: "label"
  data_param { source: "train_lmdb" batch_size: 2 } transform_param { crop_size: 64 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 8 kernel_size: 3 pad: 1 stride: 4 } }
layer { name: "score" type: "Convolution" bottom: "conv" top: "score"
  convolution_param { num_output: 5 kernel_size: 1 } }
layer { name: "label_shrink" type: "Interp" bottom: "label" top: "label_shrink"
  interp_param { shrink_factor: 4 pad_beg: 0 pad_end: 0 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "score" bottom: "label_shrink" top: "loss"
  loss_param { ignore_label: 255 } }
"""


def test_a_label_shrunk_by_interp_is_a_map(tmp_path):
    path = tmp_path / "train.prototxt"
    path.write_text(DEEPLAB)
    inferred = []
    rows, _ = summarize(str(path), phase=caffepy.TRAIN, inferred=inferred)
    shapes = {r.name: r.top_shapes for r in rows}
    assert shapes["data"] == [(2, 3, 64, 64), (2, 1, 64, 64)]
    assert shapes["label_shrink"] == [(2, 1, 16, 16)]
    assert shapes["score"] == [(2, 5, 16, 16)] and shapes["loss"] == [()]
    assert ("label given the shape N x 1 x 64 x 64: layer 'label_shrink' (Interp) needs a map"
            in inferred[0])
