"""Input sizes a net file leaves open, found by search (caffepy.zoo.input_search): the first
candidate with which every shape check passes; declared sizes and ``--input`` are not searched."""
import argparse
import re
import time

import pytest

import caffepy
from caffepy.commands import summary as cmd
from caffepy.errors import CaffeError, ShapeError
from caffepy.layers.base import shapes_only
from caffepy.proto import io as proto_io
from caffepy.zoo import replace_data_layers
from caffepy.zoo.candidates import net_sizes
from caffepy.zoo.input_search import infer_input_shapes, searched_tops
from caffepy.zoo.summary import summarize

LMDB = '''layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TEST }
  data_param { source: "val_lmdb" batch_size: 1 } }
'''

# A pooled path and a strided-conv path, concatenated twice: they line up only when H = 3 mod 4
# (227, 299, ...), not at the default 224 (candidate 1; 2 is 224 with 1 channel).
GOOGLENET_LIKE = LMDB + '''
layer { name: "p1" type: "Pooling" bottom: "data" top: "p1" pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
layer { name: "c1" type: "Convolution" bottom: "data" top: "c1" convolution_param { num_output: 4 kernel_size: 3 stride: 2 } }
layer { name: "cat1" type: "Concat" bottom: "p1" bottom: "c1" top: "cat1" }
layer { name: "p2" type: "Pooling" bottom: "cat1" top: "p2" pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
layer { name: "c2" type: "Convolution" bottom: "cat1" top: "c2" convolution_param { num_output: 4 kernel_size: 3 stride: 2 } }
layer { name: "cat2" type: "Concat" bottom: "p2" bottom: "c2" top: "cat2" }
layer { name: "gap" type: "Pooling" bottom: "cat2" top: "gap" pooling_param { pool: AVE global_pooling: true } }
layer { name: "fc" type: "InnerProduct" bottom: "gap" top: "fc" inner_product_param { num_output: 10 } }
'''

# Pooled by 4 and upsampled by 4, cropped back to the input at offset 3: fits only when
# H = 1 mod 4 (321, as DeepLab's inputs), not at 224, 227, 256, 299, 300 or 320.
FCN = LMDB + '''
layer { name: "pool" type: "Pooling" bottom: "data" top: "pool" pooling_param { pool: MAX kernel_size: 4 stride: 4 } }
layer { name: "score" type: "Convolution" bottom: "pool" top: "score" convolution_param { num_output: 2 kernel_size: 1 } }
layer { name: "up" type: "Deconvolution" bottom: "score" top: "up"
  convolution_param { num_output: 2 kernel_size: 4 stride: 4 bias_term: false } }
layer { name: "crop" type: "Crop" bottom: "up" bottom: "data" top: "out" crop_param { axis: 2 offset: 3 } }
'''

SMALL_IP = '''layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool" pooling_param { pool: MAX kernel_size: 4 stride: 4 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc" inner_product_param { num_output: 5 } }
'''

# The data is concatenated with a 7 x 9 blob: no square candidate (nor any size the file names)
# lines up.
# data must line up with two declared inputs of different sizes: taking either one's size (the
# shape each Concat asks for) fails the other Concat, at every candidate.
NOTHING_FITS = LMDB + '''
layer { name: "other" type: "Input" top: "other" input_param { shape { dim: 1 dim: 3 dim: 7 dim: 9 } } }
layer { name: "cat" type: "Concat" bottom: "data" bottom: "other" top: "cat" }
layer { name: "wide" type: "Input" top: "wide" input_param { shape { dim: 1 dim: 3 dim: 9 dim: 7 } } }
layer { name: "cat2" type: "Concat" bottom: "data" bottom: "wide" top: "cat2" }
'''


def _write(tmp_path, text, name="net.prototxt"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _command(args, capsys):
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    assert cmd.run(parser.parse_args(args)) == 0
    return capsys.readouterr().out


def test_default_size_fails_and_search_finds_the_concat_size(tmp_path, capsys):
    path = _write(tmp_path, GOOGLENET_LIKE)
    net = proto_io.read_net(path)
    with pytest.raises(ShapeError, match="Concat"):              # the default 224 x 224
        with shapes_only():
            caffepy.Net(replace_data_layers(net), caffepy.TEST)
    inferred = []
    rows, _ = summarize(path, inferred=inferred)
    assert rows[0].top_shapes == [(1, 3, 227, 227), (1,)]
    assert inferred == [
        "Input size inferred: data = 1 x 3 x 227 x 227 (the size that makes every shape check "
        "pass; 227 x 227: a usual input size, candidate 3); override with --input data=N,C,H,W"]
    out = _command([path], capsys).splitlines()
    assert out[0] == inferred[0] and out[1].startswith("layer")     # one line, then the table


def test_crop_size_of_the_other_phase_comes_first(tmp_path):
    text = GOOGLENET_LIKE.replace(LMDB, LMDB + '''layer { name: "train_data" type: "Data" top: "data"
  top: "label" include { phase: TRAIN } data_param { source: "train_lmdb" batch_size: 32 }
  transform_param { crop_size: 299 } }
''')
    assert net_sizes(proto_io.read_net(text))[0] == (299, 299, "crop_size of layer 'train_data'")
    inferred = []
    rows, _ = summarize(text, inferred=inferred)
    assert rows[0].top_shapes == [(1, 3, 299, 299), (1,)]
    assert "299 x 299: crop_size of layer 'train_data', candidate 1)" in inferred[0]
    rows, _ = summarize(text, phase=caffepy.TRAIN, inferred=inferred[:0])
    assert rows[0].top_shapes == [(32, 3, 299, 299), (32,)]         # declared: as given


def test_fcn_crop_offset_fits_at_321(tmp_path):
    inferred = []
    rows, _ = summarize(FCN, inferred=inferred)
    by = {r.name: r.top_shapes for r in rows}
    assert by["data"][0] == (1, 3, 321, 321) and by["crop"] == [(1, 2, 321, 321)]
    assert "data = 1 x 3 x 321 x 321" in inferred[0] and "a usual input size" in inferred[0]


def test_inner_product_weights_fix_the_flattened_size(tmp_path, capsys):
    deploy = ('input: "data" input_shape { dim: 1 dim: 3 dim: 48 dim: 48 }\n' + SMALL_IP)
    model = str(tmp_path / "small.caffemodel")
    caffepy.Net(deploy, caffepy.TEST).save(model)            # fc: 5 x (4 * 12 * 12)
    path = _write(tmp_path, LMDB + SMALL_IP)
    inferred = []
    rows, _ = summarize(path, inferred=inferred)              # no weights: the default fits
    assert rows[0].top_shapes[0] == (1, 3, 224, 224) and "the default size" in inferred[0]
    rows, _ = summarize(path, weights=model, inferred=inferred[:0])
    assert rows[0].top_shapes[0] == (1, 3, 48, 48) and rows[-1].params == 5 * 576 + 5
    out = _command([path, "--weights", model], capsys)
    assert out.startswith("Input size inferred: data = 1 x 3 x 48 x 48 (")
    with pytest.raises(ShapeError, match=r"layer 'fc' \(InnerProduct\): param 0 shape 5 784 "
                                         r"\(3920\) does not match the weights' 5 576"):
        summarize(path, weights=model, inputs={"data": (1, 3, 56, 56)})


def test_input_overrides_and_skips_the_search(tmp_path, capsys):
    inferred = []
    rows, _ = summarize(FCN, inputs={"data": (2, 3, 65, 65)}, inferred=inferred)
    assert inferred == [] and rows[0].top_shapes[0] == (2, 3, 65, 65)
    assert searched_tops(proto_io.read_net(FCN)) == {"data": True}
    assert searched_tops(proto_io.read_net(FCN), fixed={"data"}) == {}
    with pytest.raises(ShapeError, match="Crop"):             # a size that does not fit: as given
        summarize(FCN, inputs={"data": (1, 3, 64, 64)})
    path = _write(tmp_path, FCN)
    out = _command([path, "--input", "data=1,3,33,33"], capsys)
    assert "inferred" not in out and "1x2x33x33" in out


def test_declared_sizes_are_not_searched():
    declared = FCN.replace("batch_size: 1 }", "batch_size: 1 } transform_param { crop_size: 64 }")
    assert searched_tops(proto_io.read_net(declared)) == {}
    with pytest.raises(ShapeError, match="Crop"):             # 64 is used as given, and fails
        summarize(declared)


def test_undeclared_channels_are_tried(tmp_path):
    text = LMDB + '''layer { name: "mask" type: "Input" top: "mask"
  input_param { shape { dim: 1 dim: 1 dim: 24 dim: 24 } } }
layer { name: "mul" type: "Eltwise" bottom: "data" bottom: "mask" top: "masked"
  eltwise_param { operation: PROD } }
'''
    found = infer_input_shapes(proto_io.read_net(text))
    assert found.shapes == {"data": (1, 1, 24, 24)}
    assert "data given the shape of mask" in found.line      # unified with the declared input
    conv = ('layer { name: "conv" type: "Convolution" bottom: "mask" top: "mask2" '
            'convolution_param { num_output: 1 kernel_size: 1 } }\n')
    text = text.replace('bottom: "mask"', 'bottom: "mask2"').replace('layer { name: "mul"',
                                                                   conv + 'layer { name: "mul"')
    found = infer_input_shapes(proto_io.read_net(text))      # through a layer: channels tried
    assert found.shapes == {"data": (1, 1, 24, 24)}


@pytest.mark.slow
def test_nothing_fits_is_bounded_and_one_line(tmp_path):
    start = time.time()
    with pytest.raises(CaffeError) as info:
        summarize(_write(tmp_path, NOTHING_FITS))
    assert time.time() - start < 25
    message = str(info.value)
    assert "\n" not in message
    m = re.match(r"no input size makes every shape check pass \((\d+) candidates tried in "
                 r"\d+\.\d s: ", message)
    assert m and 100 <= int(m.group(1)) <= 200          # bounded by MAX_CANDIDATES
    assert "at the first, 224 x 224: " in message and "(Concat)" in message
    assert message.endswith("give the size with --input data=N,C,H,W")
    with pytest.raises(CaffeError, match=r"\(5 candidates tried"):
        infer_input_shapes(proto_io.read_net(NOTHING_FITS), max_candidates=5)
    with pytest.raises(CaffeError, match=r"\(1 candidates tried"):
        infer_input_shapes(proto_io.read_net(NOTHING_FITS), max_seconds=0)


def test_reader_guesses_are_the_first_candidates():
    mnist = LMDB.replace("val_lmdb", "mnist_test_lmdb") + SMALL_IP
    found = infer_input_shapes(proto_io.read_net(mnist))
    assert found.shapes == {"data": (1, 1, 28, 28)} and found.tried == 1
    assert "caffepy.zoo's size for this reader, from its source or fork, candidate 1" in found.line
    segnet = '''layer { name: "data" type: "DenseImageData" top: "data" top: "label"
  dense_image_data_param { source: "camvid.txt" batch_size: 1 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 2 kernel_size: 3 pad: 1 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "conv" bottom: "label" top: "loss" }
'''
    found = infer_input_shapes(proto_io.read_net(segnet))
    assert found.shapes == {"data": (1, 3, 360, 480)} and found.tried == 1


SUPER_RESOLUTION = """
layer { name: "data" type: "HDF5Data" top: "data" top: "label"
        hdf5_data_param { source: "train.txt" batch_size: 2 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 1 kernel_size: 3 pad: 1 } }
layer { name: "sum" type: "Eltwise" bottom: "data" bottom: "conv" top: "sum" }
layer { name: "loss" type: "EuclideanLoss" bottom: "sum" bottom: "label" top: "loss" }
"""

DENSITY_MAP = """
layer { name: "data" type: "HDF5Data" top: "data" top: "density"
        hdf5_data_param { source: "train.txt" batch_size: 1 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 1 kernel_size: 8 stride: 8 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "conv" bottom: "density" top: "loss" }
"""


def test_label_maps_are_tried_when_label_vectors_fit_nothing(tmp_path):
    """A reader's other top guessed as a label vector (N,) fails every size; the search then
    lays it out as a map: of the image's size and channels (a super-resolution target: the
    one-channel image plus its residual), or at 1/8 of it (a crowd-counting density map)."""
    rows, _ = summarize(_write(tmp_path, SUPER_RESOLUTION), phase=caffepy.TRAIN)
    shapes = dict((r.name, r.top_shapes) for r in rows)
    assert shapes["data"][0][1] == 1 and shapes["data"][1] == shapes["data"][0]
    rows, _ = summarize(_write(tmp_path, DENSITY_MAP), phase=caffepy.TRAIN)
    data, density = dict((r.name, r.top_shapes) for r in rows)["data"]
    assert density[1:] == (1, data[2] // 8, data[3] // 8)


# A super-resolution net at two scales (IDN-style): the low-resolution image is upsampled by a
# stride-2 deconvolution and added to the bicubic high-resolution input, then compared with the
# high-resolution label. No single size fits the three tops of the reader.
TWO_SCALES = """
layer { name: "data" type: "HDF5Data" top: "bic" top: "data" top: "label"
        hdf5_data_param { source: "train.txt" batch_size: 2 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 1 kernel_size: 3 pad: 1 } }
layer { name: "up" type: "Deconvolution" bottom: "conv" top: "up"
        convolution_param { num_output: 1 kernel_size: 4 stride: 2 pad: 1 } }
layer { name: "sum" type: "Eltwise" bottom: "bic" bottom: "up" top: "sum" }
layer { name: "loss" type: "EuclideanLoss" bottom: "sum" bottom: "label" top: "loss" }
"""


def test_a_reader_top_takes_the_shape_of_the_blob_it_must_match(tmp_path):
    """Unification: the Eltwise needs bic of up's shape, the loss needs label of sum's: each
    searched top takes the shape of the blob it must match (up = 2 x data's size), and the line
    says so; a shape given with --input is never changed (the error stays)."""
    path = _write(tmp_path, TWO_SCALES)
    inferred = []
    rows, _ = summarize(path, phase=caffepy.TRAIN, inferred=inferred)
    shapes = dict((r.name, r.top_shapes) for r in rows)
    bic, data, label = shapes["data"]
    assert shapes["up"][0] == bic == label
    assert bic[2:] == (2 * data[2], 2 * data[3]) and bic[1] == 1
    assert "bic given the shape of up" in inferred[0] and "label given the shape of sum" in inferred[0]
    with pytest.raises(CaffeError, match="'sum' \\(Eltwise\\)"):
        summarize(path, phase=caffepy.TRAIN, inputs={"bic": (2, 1, 50, 50),
                                                     "data": (2, 1, 40, 40)})


def test_a_terminal_layer_failing_only_at_fitting_sizes_is_left_out(tmp_path):
    """The Concats fit only at 3 mod 4; a fork's evaluation layer at the end fails there on its
    own form (not on a shape check): summary shows the net at the size the rest fits, that layer
    with '?' tops and a note naming the size and its error. A terminal Concat that fits nowhere
    stays an error (the search is for it)."""
    from caffepy.layers import plugins
    from caffepy.layers.base import Layer
    from caffepy.errors import NetError

    @plugins.register_layer("ForkEvaluate")
    class ForkEvaluate(Layer):
        def reshape(self, bottom, top):
            raise NetError("layer '%s' (ForkEvaluate): bottom[1] must be 1 x 1 x G x 8"
                           % self.layer_param.name)
    try:
        text = GOOGLENET_LIKE + ('layer { name: "eval" type: "ForkEvaluate" bottom: "fc" '
                                 'bottom: "label" top: "eval" }\n')
        notes, inferred = [], []
        rows, _ = summarize(_write(tmp_path, text), notes=notes, inferred=inferred)
        shapes = dict((r.name, r.top_shapes) for r in rows)
        assert shapes["eval"] == ["?"] and shapes["data"][0][2] % 4 == 3
        assert "at 227 x 227" in notes[0] and "1 x 1 x G x 8" in notes[0]
        assert "227" in inferred[0]
    finally:
        plugins.unregister_layer("ForkEvaluate")


def test_the_size_a_loss_asks_for_is_tried_next(tmp_path):
    """An autoencoder whose deconvolutions make 82 x 82 (no usual size, no multiple of 8) from
    five RGB frames cut into 15 channels by a Slice without slice points: the EuclideanLoss
    comparing them asks for 82 x 82, which is tried next and builds."""
    from caffepy.zoo.summary import summarize
    text = """layer { name: "data" type: "Data" top: "data"
  data_param { source: "frames_leveldb" batch_size: 4 backend: LEVELDB } }
layer { name: "cut" type: "Slice" bottom: "data" """ + " ".join(
        'top: "f%d"' % i for i in range(15)) + """ }
layer { name: "rgb" type: "Concat" bottom: "f12" bottom: "f13" bottom: "f14" top: "rgb" }
layer { name: "quiet" type: "Silence" """ + " ".join('bottom: "f%d"' % i for i in range(12)) + """ }
layer { name: "conv" type: "Convolution" bottom: "rgb" top: "conv"
  convolution_param { num_output: 2 kernel_size: 8 stride: 2 } }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip" inner_product_param { num_output: 256 } }
layer { name: "r" type: "Reshape" bottom: "ip" top: "r"
  reshape_param { shape { dim: -1 dim: 4 dim: 8 dim: 8 } } }
layer { name: "up1" type: "Deconvolution" bottom: "r" top: "up1"
  convolution_param { num_output: 4 kernel_size: 6 stride: 2 pad: 2 } }
layer { name: "up2" type: "Deconvolution" bottom: "up1" top: "up2"
  convolution_param { num_output: 3 kernel_size: 8 stride: 2 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "up2" bottom: "rgb" top: "loss" }
"""
    path = tmp_path / "ae.prototxt"
    path.write_text(text)
    inferred = []
    rows, _ = summarize(str(path), inferred=inferred, strict=True)
    shapes = {r.name: r.top_shapes for r in rows}
    assert shapes["data"] == [(4, 15, 38, 38)] and shapes["up2"] == [(4, 3, 38, 38)]
    assert "38 x 38: the size layer 'loss' asks for" in inferred[0]
    assert "data given the shape N x 15 x 38 x 38 that Slice layer 'cut' needs" in inferred[0]


AUGMENT = """import caffe


class Augment(caffe.Layer):
    def setup(self, bottom, top):
        pass

    def reshape(self, bottom, top):        # reads the label's spatial axes, as DIGITS' do
        top[0].reshape(*bottom[0].data.shape)
        top[1].reshape(bottom[1].data.shape[0], 1, bottom[1].data.shape[2],
                       bottom[1].data.shape[3])

    def forward(self, bottom, top):
        pass
"""

SEPARATE_LABEL_READER = '''
layer { name: "data" type: "Data" top: "data" data_param { source: "f_lmdb" batch_size: 2 } }
layer { name: "label" type: "Data" top: "label" data_param { source: "l_lmdb" batch_size: 2 } }
layer { name: "aug" type: "Python" bottom: "data" bottom: "label" top: "adata" top: "alabel"
  python_param { module: "augment_labels" layer: "Augment" } }
layer { name: "conv" type: "Convolution" bottom: "adata" top: "conv"
  convolution_param { num_output: 2 kernel_size: 1 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "conv" bottom: "alabel" top: "loss" }
'''


def test_a_reader_of_labels_alone_gets_label_maps_when_a_python_layer_needs_them(tmp_path,
                                                                                monkeypatch):
    """A second Data layer whose one top is 'label' is a label reader: its label vectors fail
    a Python layer's reshape (IndexError on the spatial axes), which the search counts as a
    wrong size and answers with label maps of the image's size."""
    (tmp_path / "augment_labels.py").write_text(AUGMENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "train.prototxt"
    path.write_text(SEPARATE_LABEL_READER)
    rows, _ = summarize(str(path), phase=caffepy.TRAIN)
    by = {r.name: r for r in rows}
    image = by["data"].top_shapes[0]
    assert len(image) == 4 and image[0] == 2
    assert by["label"].top_shapes == [(2, 1) + tuple(image[2:])]
    assert by["loss"].top_shapes == [()]
