"""The open tops of replaced readers take the shapes their readers need (caffepy.zoo.label_shapes):
a Slice's, and the one a layer that rejects them names; a declared or built top keeps its own."""
import pytest

import caffepy
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.zoo.summary import summarize

HDF5 = """layer { name: "data" type: "HDF5Data" top: "data" top: "label"
  hdf5_data_param { source: "train.txt" batch_size: 8 } }
"""
LMDB = """layer { name: "data" type: "Data" top: "data" top: "label"
  data_param { source: "train_lmdb" batch_size: 4 } transform_param { crop_size: 32 } }
"""
FEATURES = """layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 } }
"""

SLICED = HDF5 + FEATURES + """layer { name: "slicer" type: "Slice" bottom: "label"
  top: "l1" top: "l2" top: "l3" top: "l4" slice_param { axis: 1 slice_point: 3 slice_point: 6 slice_point: 9 } }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip" inner_product_param { num_output: 3 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "l1" top: "loss" }
layer { name: "cls" type: "InnerProduct" bottom: "conv" top: "cls" inner_product_param { num_output: 7 } }
layer { name: "loss4" type: "SoftmaxWithLoss" bottom: "cls" bottom: "l4" top: "loss4" }
"""

REGRESSION = LMDB + FEATURES + """layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
  inner_product_param { num_output: 2 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "label" top: "loss" }
"""


def _summary(tmp_path, text, **kw):
    path = tmp_path / "train.prototxt"
    path.write_text(text)
    inferred = []
    rows, _ = summarize(str(path), phase=caffepy.TRAIN, inferred=inferred, **kw)
    return {r.name: r.top_shapes for r in rows}, inferred


@pytest.mark.parametrize("strict", [False, True])
def test_a_label_sliced_on_axis_1_gets_the_width_of_its_slices(tmp_path, strict):
    shapes, inferred = _summary(tmp_path, SLICED, strict=strict)
    assert shapes["data"][1] == (8, 10)
    assert shapes["slicer"] == [(8, 3), (8, 3), (8, 3), (8, 1)]
    assert shapes["loss"] == [()] and shapes["loss4"] == [()]
    assert "label given the shape N x 12 that Slice layer 'slicer' needs" in inferred[0]
    assert ("label given the shape 8 x 10 that layer 'loss4' (SoftmaxWithLoss) needs for l4 "
            "(through Slice layer 'slicer')") in inferred[0]


def test_a_slice_widens_an_open_top(tmp_path):
    """Four frames of 3 channels stacked in an HDF5 blob (slice points 3, 6, 9: 12 channels, each
    frame read by one convolution); an HDF5 row of 5 values cut into 4 inputs and the target of
    a regression of 1 output: (N, 5), whatever the image size tried."""
    frames = HDF5 + """layer { name: "slicer" type: "Slice" bottom: "data"
  top: "f1" top: "f2" top: "f3" top: "f4" slice_param { slice_dim: 1 slice_point: 3 slice_point: 6 slice_point: 9 } }
layer { name: "conv" type: "Convolution" bottom: "f1" bottom: "f2" bottom: "f3" bottom: "f4"
  top: "c1" top: "c2" top: "c3" top: "c4" convolution_param { num_output: 4 kernel_size: 3 } }
"""
    shapes, _ = _summary(tmp_path, frames)
    assert shapes["data"][0] == (8, 12, 224, 224) and shapes["conv"][3] == (8, 4, 222, 222)
    row = HDF5.replace('top: "data" top: "label"', 'top: "row"') + """layer { name: "cut"
  type: "Slice" bottom: "row" top: "x" top: "y" slice_param { slice_dim: 1 slice_point: 4 } }
layer { name: "fc" type: "InnerProduct" bottom: "x" top: "fc" inner_product_param { num_output: 1 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "fc" bottom: "y" top: "loss" }
"""
    shapes, inferred = _summary(tmp_path, row)
    assert shapes["data"] == [(8, 5)] and shapes["cut"] == [(8, 4), (8, 1)]
    assert "row given the shape 8 x 5 that layer 'loss' (EuclideanLoss) needs for y" in inferred[0]


def test_slice_rules():
    from caffepy.zoo.label_shapes import sliced_shape

    def slice_layer(axis=1, points=(), tops=2):
        lp = caffe_pb2.LayerParameter(name="s", type="Slice", bottom=["label"],
                                      top=["t%d" % i for i in range(tops)])
        lp.slice_param.axis = axis
        lp.slice_param.slice_point.extend(points)
        return lp
    assert sliced_shape([8], slice_layer(1, (3, 6, 9), 4)) == [8, 12]    # four slices of 3
    assert sliced_shape([8], slice_layer(1, (3, 6, 8), 4)) == [8, 9]
    assert sliced_shape([8], slice_layer(1, (), 3)) == [8, 3]            # each top 1 wide
    assert sliced_shape([8], slice_layer(2, (4,), 2)) == [8, 1, 5]
    assert sliced_shape([8], slice_layer(-1, (10, 11), 3)) == [8, 12]    # from the end
    assert sliced_shape([8], slice_layer(1, (4,), 2)) == [8, 5]
    assert sliced_shape([8], slice_layer(0, (4,), 2)) is None            # the batch axis
    assert sliced_shape([8, 3, 5, 5], slice_layer(1, (4,), 2)) == [8, 5, 5, 5]   # widened
    assert sliced_shape([8, 3, 5, 5], slice_layer(1, (1, 2), 3)) is None          # fits


def test_a_label_compared_with_a_prediction_takes_its_shape(tmp_path):
    """Nothing is searched here (crop_size): the label still takes the prediction's shape."""
    shapes, inferred = _summary(tmp_path, REGRESSION)
    assert shapes["data"] == [(4, 3, 32, 32), (4, 2)]
    assert "label given the shape of ip" in inferred[0]
    searched, inferred = _summary(tmp_path, REGRESSION.replace(" crop_size: 32", ""))
    assert searched["data"] == [(4, 3, 224, 224), (4, 2)]
    assert "label given the shape of ip" in inferred[0]


def test_a_label_gets_the_batch_and_count_its_loss_needs(tmp_path):
    """A loss whose label is sliced from the end of the label (axis -1) on a label vector, and a
    segmentation label: one value per position of the prediction."""
    text = HDF5 + FEATURES + """layer { name: "slicer" type: "Slice" bottom: "label"
  top: "mark" top: "kind" slice_param { axis: -1 slice_point: 10 } }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip" inner_product_param { num_output: 10 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "mark" top: "loss" }
"""
    shapes, _ = _summary(tmp_path, text)
    assert shapes["data"][1] == (8, 11) and shapes["slicer"] == [(8, 10), (8, 1)]
    seg = LMDB + FEATURES + """layer { name: "score" type: "Convolution" bottom: "conv" top: "score"
  convolution_param { num_output: 21 kernel_size: 1 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "score" bottom: "label" top: "loss" }
layer { name: "acc" type: "Accuracy" bottom: "score" bottom: "label" top: "acc" }
"""
    shapes, inferred = _summary(tmp_path, seg)
    assert shapes["data"][1] == (4, 1, 15, 15) and shapes["acc"] == [()]
    assert "label given the shape 4 x 1 x 15 x 15 that layer 'loss' (SoftmaxWithLoss) needs" in \
        inferred[0]


def test_an_lstm_cont_read_from_a_reader_takes_its_sequence_shape(tmp_path):
    text = """layer { name: "data" type: "HDF5Data" top: "data" top: "cont"
  hdf5_data_param { source: "train.txt" batch_size: 6 } }
layer { name: "seq" type: "Reshape" bottom: "data" top: "seq"
  reshape_param { shape { dim: 12 dim: 3 dim: -1 } } }
layer { name: "lstm" type: "LSTM" bottom: "seq" bottom: "cont" top: "lstm"
  recurrent_param { num_output: 5 } }
"""
    shapes, inferred = _summary(tmp_path, text, inputs={"data": (6, 2, 3, 4)})
    assert shapes["data"] == [(6, 2, 3, 4), (12, 3)] and shapes["lstm"] == [(12, 3, 5)]
    assert "cont given the shape 12 x 3 that layer 'lstm' (LSTM) needs" in inferred[0]


def test_declared_tops_keep_their_shapes(tmp_path):
    """A MemoryData label is (N,) as the layer makes it, and a blob given with --input stays as
    given: neither is learned, so the build fails as before."""
    memory = REGRESSION.replace(LMDB, """layer { name: "data" type: "MemoryData" top: "data"
  top: "label" memory_data_param { batch_size: 4 channels: 3 height: 32 width: 32 } }
""")
    with pytest.raises(CaffeError, match=r"'loss' \(EuclideanLoss\): inputs must have the same "
                                         r"dimension \(\(4, 2\) vs \(4,\)\)"):
        _summary(tmp_path, memory)
    with pytest.raises(CaffeError, match=r"'slicer' \(Slice\): axis 1 out of range"):
        _summary(tmp_path, SLICED, inputs={"label": (8,)})


def test_an_image_named_after_its_labels_is_an_image(tmp_path):
    text = LMDB.replace('top: "data"', 'top: "labeled_data"') + FEATURES.replace(
        'bottom: "data"', 'bottom: "labeled_data"')
    shapes, _ = _summary(tmp_path, text)
    assert shapes["data"] == [(4, 3, 32, 32), (4,)] and shapes["conv"] == [(4, 4, 15, 15)]


def test_hdf5_rows_of_values(tmp_path):
    """Two HDF5 files of rows, each cut into inputs and a target, the targets joined: only rows
    (N, C) of values fit, not images (tried second)."""
    half = """layer { name: "in_%s" type: "HDF5Data" top: "full_%s"
  hdf5_data_param { source: "%s.txt" batch_size: 10 } }
layer { name: "cut_%s" type: "Slice" bottom: "full_%s" top: "x_%s" top: "y_%s"
  slice_param { slice_dim: 1 slice_point: 4 } }
layer { name: "fc_%s" type: "InnerProduct" bottom: "x_%s" top: "fc_%s" inner_product_param { num_output: 1 } }
"""
    text = half % (("a",) * 10) + half % (("b",) * 10) + """layer { name: "join" type: "Concat"
  bottom: "fc_a" bottom: "fc_b" top: "join" }
layer { name: "fc" type: "InnerProduct" bottom: "join" top: "fc" inner_product_param { num_output: 2 } }
layer { name: "targets" type: "Concat" bottom: "y_a" bottom: "y_b" top: "targets" }
layer { name: "loss" type: "EuclideanLoss" bottom: "fc" bottom: "targets" top: "loss" }
"""
    shapes, inferred = _summary(tmp_path, text)
    assert shapes["in_a"] == [(10, 5)] and shapes["in_b"] == [(10, 5)]
    assert shapes["targets"] == [(10, 2)]
    assert "rows of values (N x C)" in inferred[0] and "candidate 2" in inferred[0]


def test_more_images_of_a_reader_and_reshaped_labels(tmp_path):
    """A triplet reader's three images, each read by a convolution; a second frame joined with the
    first; a label reshaped to 0 x 1 x 49 x 1."""
    text = """layer { name: "data" type: "HDF5Data" top: "data_a" top: "data_p" top: "data_n"
  top: "frame" top: "label" hdf5_data_param { source: "triplets.txt" batch_size: 1 } }
layer { name: "conv" type: "Convolution" bottom: "data_a" bottom: "data_p" bottom: "data_n"
  top: "ca" top: "cp" top: "cn" convolution_param { num_output: 4 kernel_size: 3 } }
layer { name: "pair" type: "Concat" bottom: "data_a" bottom: "frame" top: "pair" }
layer { name: "lr" type: "Reshape" bottom: "label" top: "lr"
  reshape_param { shape { dim: 0 dim: 1 dim: 49 dim: 1 } } }
"""
    shapes, inferred = _summary(tmp_path, text, strict=True)
    assert shapes["data"] == [(1, 3, 224, 224)] * 4 + [(1, 1, 49, 1)]
    assert shapes["conv"] == [(1, 4, 222, 222)] * 3 and shapes["pair"] == [(1, 6, 224, 224)]
    assert "data_p given the shape of data_a (an image: a convolution or pooling reads it)" in \
        inferred[0]
    assert "frame given the shape 1 x 3 x 224 x 224 that layer 'pair' (Concat) needs" in inferred[0]


LABELS = """layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  data_param { source: "train_lmdb" batch_size: 4 } transform_param { crop_size: 32 } }
layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TEST }
  data_param { source: "val_lmdb" batch_size: 2 } transform_param { crop_size: 32 } }
layer { name: "words" type: "HDF5Data" top: "words" top: "has" include { phase: TRAIN }
  hdf5_data_param { source: "train.txt" batch_size: 4 } }
layer { name: "words" type: "HDF5Data" top: "words" top: "has" include { phase: TEST }
  hdf5_data_param { source: "val.txt" batch_size: 2 } }
""" + FEATURES + """layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
  inner_product_param { num_output: 6 } }
"""


@pytest.mark.parametrize("phase", [caffepy.TRAIN, caffepy.TEST])
def test_a_label_read_along_axis_1_gets_a_second_axis(tmp_path, phase):
    """A label vector (N,) that a Tile, a Concat or a Scale reads along axis 1 is (N, 1) (an
    HDF5 flag tiled over the width of a prediction, coordinates concatenated into a box, a label
    normalized by BatchNorm and Scale); each phase keeps its batch."""
    n = 4 if phase == caffepy.TRAIN else 2
    text = LABELS + """layer { name: "tile" type: "Tile" bottom: "has" top: "tiled"
  tile_param { axis: 1 tiles: 6 } }
layer { name: "masked" type: "Eltwise" bottom: "tiled" bottom: "ip" top: "masked"
  eltwise_param { operation: PROD } }
layer { name: "bn" type: "BatchNorm" bottom: "label" top: "bn" }
layer { name: "sc" type: "Scale" bottom: "bn" top: "sc" scale_param { bias_term: true } }
layer { name: "cat" type: "Concat" bottom: "sc" bottom: "tiled" top: "cat" }
"""
    path = tmp_path / "train.prototxt"
    path.write_text(text)
    inferred = []
    rows, _ = summarize(str(path), phase=phase, inferred=inferred, strict=True)
    shapes = {r.name: r.top_shapes for r in rows}
    assert shapes["tile"] == [(n, 6)] and shapes["masked"] == [(n, 6)]
    assert shapes["sc"] == [(n, 1)] and shapes["cat"] == [(n, 7)]
    assert "has given the shape N x 1: layer 'tile' (Tile) reads it along axis 1" in inferred[0]
    assert "label given the shape N x 1: layer 'sc' (Scale) reads it along axis 1 for bn" \
        in inferred[0]


def test_a_label_read_by_an_inner_product_gets_a_second_axis(tmp_path):
    """An HDF5 file's first top named as a label, read by an InnerProduct: (N, 1), and the
    error a 1-axis blob gives on its own names the layer."""
    text = """layer { name: "data" type: "HDF5Data" top: "label" top: "cls"
  hdf5_data_param { source: "train.txt" batch_size: 5 } }
layer { name: "ip" type: "InnerProduct" bottom: "label" top: "ip" inner_product_param { num_output: 3 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "cls" top: "loss" }
"""
    shapes, inferred = _summary(tmp_path, text, strict=True)
    assert shapes["data"] == [(5, 1), (5,)] and shapes["ip"] == [(5, 3)]
    path = tmp_path / "deploy.prototxt"
    path.write_text('input: "x" input_shape { dim: 5 }\n' + text.split("\n", 2)[2]
                    .replace('bottom: "label"', 'bottom: "x"').split("layer { name: \"loss\"")[0])
    with pytest.raises(CaffeError, match=r"deploy.prototxt:\d+: layer 'ip' \(InnerProduct\): "
                                         r"axis 1 out of range for a 1-d blob"):
        summarize(str(path), strict=True)


def test_channels_are_tried_when_only_the_size_is_declared(tmp_path):
    """An LMDB cropped to 30 x 30 whose images, reshaped to rows, an Eltwise adds to 900 values
    of noise: the channels the file does not declare are 1, not the default 3."""
    text = """layer { name: "data" type: "Data" top: "data" top: "dummy"
  data_param { source: "train_lmdb" batch_size: 10 } transform_param { crop_size: 30 } }
layer { name: "flat" type: "Reshape" bottom: "data" top: "flat"
  reshape_param { shape { dim: 0 dim: -1 } } }
layer { name: "noise" type: "DummyData" top: "noise" dummy_data_param { shape { dim: 10 dim: 900 } } }
layer { name: "noisy" type: "Eltwise" bottom: "noise" bottom: "flat" top: "noisy" }
"""
    shapes, inferred = _summary(tmp_path, text, strict=True)
    assert shapes["data"][0] == (10, 1, 30, 30) and shapes["noisy"] == [(10, 900)]
    assert "1 channel (the file declares the size, not the channels)" in inferred[0]
    with pytest.raises(CaffeError, match="'noisy' \\(Eltwise\\)"):
        _summary(tmp_path, text.replace("dim: 900", "dim: 901"), strict=True)


CAPTIONS = """layer { name: "data" type: "ImageData" top: "data" top: "label"
  include { phase: TRAIN stage: "captions" }
  image_data_param { source: "images.txt" batch_size: 6 new_height: 32 new_width: 32 } }
layer { name: "words" type: "HDF5Data" top: "cont" top: "input_words" top: "target"
  include { phase: TRAIN stage: "captions" } hdf5_data_param { source: "words.txt" batch_size: 5 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 } }
layer { name: "feat" type: "InnerProduct" bottom: "conv" top: "feat" inner_product_param { num_output: 8 } }
layer { name: "embed" type: "Embed" bottom: "input_words" top: "embedded"
  embed_param { input_dim: 50 num_output: 16 } }
layer { name: "lstm" type: "LSTM" bottom: "embedded" bottom: "cont" bottom: "feat" top: "lstm"
  recurrent_param { num_output: 12 } }
layer { name: "predict" type: "InnerProduct" bottom: "lstm" top: "predict"
  inner_product_param { num_output: 50 axis: 2 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "predict" bottom: "target" top: "loss"
  loss_param { ignore_label: -1 } softmax_param { axis: 2 } }
"""


def test_sentences_read_through_an_embed_by_an_lstm_with_a_static_input(tmp_path):
    """LRCN's captioning net: word indices (T, N) from an HDF5 file, embedded and read by an LSTM
    whose static input is the image features of a batch of 6: the words, the sequence markers
    and the targets are 5 steps of 6 streams; its data layers are all given to a stage, so the
    net is shown with that stage."""
    path = tmp_path / "lrcn.prototxt"
    path.write_text(CAPTIONS)
    inferred, notes = [], []
    rows, _ = summarize(str(path), inferred=inferred, notes=notes, strict=True)
    shapes = {r.name: r.top_shapes for r in rows}
    assert shapes["words"] == [(5, 6), (5, 6), (5, 6)]
    assert shapes["lstm"] == [(5, 6, 12)] and shapes["loss"] == [()]
    assert "input_words given the shape 5 x 6 that layer 'lstm' (LSTM) needs for embedded " \
           "(through an Embed)" in inferred[0]
    assert any("showing phase TRAIN with stage captions" in n for n in notes)


def test_no_stage_is_chosen_when_none_makes_the_net_whole(tmp_path):
    path = tmp_path / "lrcn.prototxt"
    path.write_text(CAPTIONS.replace('bottom: "feat" top: "lstm"', 'bottom: "fc9" top: "lstm"'))
    with pytest.raises(CaffeError, match="unknown bottom blob 'data'"):
        summarize(str(path), strict=True)


def test_pg_cnn_multi_label_reader(tmp_path):
    """mysee1989/PG-CNN's MultiLabelImageData: the image sized by new_height / new_width (or the
    crop), the label batch_size x label_num (an expression class and 24 landmarks (x, y))."""
    text = """layer { name: "data" type: "MultiLabelImageData" top: "data" top: "label"
  transform_param { crop_size: 96 }
  multi_label_image_data_param { source: "train.txt" batch_size: 3 new_height: 100 new_width: 100
    is_color: false label_num: 49 } }
layer { name: "cut" type: "Slice" bottom: "label" top: "cls" top: "points"
  slice_param { axis: 1 slice_point: 1 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 } }
"""
    shapes, _ = _summary(tmp_path, text, strict=True)
    assert shapes["data"] == [(3, 1, 96, 96), (3, 49)]
    assert shapes["cut"] == [(3, 1), (3, 48)]
    shapes, _ = _summary(tmp_path, text.replace("transform_param { crop_size: 96 }", ""),
                         strict=True)
    assert shapes["data"] == [(3, 1, 100, 100), (3, 49)]


def test_a_replaced_python_reader_keeps_the_batch_size_of_its_param_str(tmp_path):
    """Two images of a pair concatenated on axis 0 and their features cut back at the batch size
    (slice_point 10): the replaced Python reader has the batch its param_str gives."""
    text = """layer { name: "data" type: "Python" top: "a" top: "b" top: "sim"
  python_param { module: "absent_reader" layer: "PairLayer" param_str: "{'batch_size': 10}" } }
layer { name: "pair" type: "Concat" bottom: "a" bottom: "b" top: "ab" concat_param { axis: 0 } }
layer { name: "ip" type: "InnerProduct" bottom: "ab" top: "ip" inner_product_param { num_output: 4 } }
layer { name: "cut" type: "Slice" bottom: "ip" top: "fa" top: "fb" slice_param { axis: 0 slice_point: 10 } }
layer { name: "loss" type: "ContrastiveLoss" bottom: "fa" bottom: "fb" bottom: "sim" top: "loss" }
"""
    shapes, _ = _summary(tmp_path, text, strict=True)
    assert shapes["data"] == [(10, 3, 224, 224), (10, 3, 224, 224), (10,)]
    assert shapes["cut"] == [(10, 4), (10, 4)] and shapes["loss"] == [()]


def test_nd_memory_data_in_summary(tmp_path):
    """A 3-D U-Net of the OpenCL branch: MemoryData with ``dim`` is that shape, its label
    (N, 1, 1, 1, 1); N-d pooling and MergeCrop build on it."""
    text = """layer { name: "data" type: "MemoryData" top: "data" top: "label"
  memory_data_param { dim: 1 dim: 1 dim: 12 dim: 12 dim: 12 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 2 kernel_size: 3 } }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
  pooling_param { pool: MAX kernel_size: 2 kernel_size: 2 kernel_size: 2 stride: 2 stride: 2 stride: 2 } }
layer { name: "up" type: "Deconvolution" bottom: "pool" top: "up"
  convolution_param { num_output: 2 kernel_size: 2 stride: 2 } }
layer { name: "merge" type: "MergeCrop" bottom: "up" bottom: "conv" top: "merge" }
"""
    shapes, _ = _summary(tmp_path, text, strict=True)
    assert shapes["data"] == [(1, 1, 12, 12, 12), (1, 1, 1, 1, 1)]
    assert shapes["merge"] == [(1, 4, 10, 10, 10)]


def test_feature_vectors_flattened_for_a_loss_sit_in_the_channels(tmp_path):
    """An autoencoder over an LMDB of 5-value feature vectors: the loss compares the decoder's 5
    outputs with the Flatten of the data, so the data is N x 5 x 1 x 1."""
    text = """layer { name: "data" type: "Data" top: "data"
  data_param { source: "features_lmdb" batch_size: 8 } }
layer { name: "flat" type: "Flatten" bottom: "data" top: "flat" }
layer { name: "enc" type: "InnerProduct" bottom: "data" top: "enc" inner_product_param { num_output: 3 } }
layer { name: "dec" type: "InnerProduct" bottom: "enc" top: "dec" inner_product_param { num_output: 5 } }
layer { name: "loss" type: "SigmoidCrossEntropyLoss" bottom: "dec" bottom: "flat" top: "loss" }
"""
    shapes, inferred = _summary(tmp_path, text, strict=True)
    assert shapes["data"] == [(8, 5, 1, 1)] and shapes["flat"] == [(8, 5)]
    assert "for flat (through a Flatten: the values in the channels)" in inferred[0]


def test_smooth_l1_ohem_targets_take_the_prediction_shape(tmp_path):
    text = HDF5.replace('top: "label"', 'top: "targets"') + FEATURES + """layer { name: "pred"
  type: "InnerProduct" bottom: "conv" top: "pred" inner_product_param { num_output: 8 } }
layer { name: "loss" type: "SmoothL1LossOHEM" bottom: "pred" bottom: "targets" top: "loss" }
"""
    shapes, inferred = _summary(tmp_path, text, strict=True)
    assert shapes["data"][1] == (8, 8) and shapes["loss"] == [()]


def test_rmpe_heatmap_reader_is_replaced_and_its_maps_learned(tmp_path):
    """RMPE's DataHeatmap reads a list file the repository does not ship: it is replaced by
    images batchsize x 3 x outsize x outsize and heat maps whose joint count the loss gives."""
    text = """layer { name: "data" type: "DataHeatmap" top: "data" top: "label"
  heatmap_data_param { source: "absent.txt" batchsize: 2 outsize: 32 label_width: 8 label_height: 8 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 7 kernel_size: 4 stride: 4 } }
layer { name: "loss" type: "EuclideanLossHeatmap" bottom: "conv" bottom: "label" bottom: "data"
  top: "loss" }
"""
    shapes, _ = _summary(tmp_path, text, strict=True)
    assert shapes["data"] == [(2, 3, 32, 32), (2, 7, 8, 8)] and shapes["loss"] == [()]
