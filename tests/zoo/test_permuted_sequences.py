"""The input-size search on sequence nets whose HDF5 frames a Permute turns time-major (the
ConvLSTM autoencoders of t2mhanh/caffe_convLSTM_WTA): the shapes their readers need are learned
through the Permute, and the targets beside the frames take the frames' shape."""
from caffepy.zoo.summary import summarize

HEAD = """
layer { name: "sequence" type: "HDF5Data" top: "sequence"
        hdf5_data_param { source: "seq.txt" batch_size: 7 } }
layer { name: "slice_seq" type: "Slice" bottom: "sequence" top: "seq_enc" top: "seq_dec"
        slice_param { axis: 0 slice_point: 4 } }
layer { name: "data" type: "HDF5Data" top: "input" top: "match"
        hdf5_data_param { source: "train.txt" batch_size: 2 } }
"""
LSTM = """
layer { name: "dummy" type: "DummyData" top: "dummy"
        dummy_data_param { shape { dim: 1 dim: 2 dim: 3 dim: 32 dim: 32 } } }
layer { name: "encode1" type: "ConvLSTM" bottom: "%s" bottom: "seq_enc" bottom: "dummy"
        bottom: "dummy" top: "encode1" top: "encode1_h" top: "encode1_c"
        recurrent_param { expose_hidden: true }
        lstm_conv_param { num_output: 3 kernel_size: 3 pad: 1 } }
layer { name: "silence" type: "Silence" bottom: "encode1_h" bottom: "encode1_c" bottom: "seq_dec" }
layer { name: "out" type: "Convolution" bottom: "encode1" top: "out"
        convolution_param { num_output: 1 kernel_size: 1 axis: 2 } }
layer { name: "flat_out" type: "Flatten" bottom: "out" top: "out_flat" }
layer { name: "flat_match" type: "Flatten" bottom: "%s" top: "match_flat" }
layer { name: "loss" type: "EuclideanLoss" bottom: "out_flat" bottom: "match_flat" top: "l2" }
"""
FRAMES = HEAD + """
layer { name: "input_permute" type: "Permute" bottom: "input" top: "input_p"
        permute_param { order: 1 order: 0 order: 2 order: 3 } }
layer { name: "match_permute" type: "Permute" bottom: "match" top: "match_p"
        permute_param { order: 1 order: 0 order: 2 order: 3 } }
layer { name: "input_reshape" type: "Reshape" bottom: "input_p" top: "input_p_r"
        reshape_param { shape { dim: 4 dim: 2 dim: 1 dim: 32 dim: 32 } } }
layer { name: "match_reshape" type: "Reshape" bottom: "match_p" top: "match_p_r"
        reshape_param { shape { dim: 4 dim: 2 dim: 1 dim: 32 dim: 32 } } }
""" + LSTM % ("input_p_r", "match_p_r")
VOLUMES = HEAD + """
layer { name: "input_permute" type: "Permute" bottom: "input" top: "input_p"
        permute_param { order: 1 order: 0 order: 2 order: 3 } }
layer { name: "match_permute" type: "Permute" bottom: "match" top: "match_p"
        permute_param { order: 1 order: 0 order: 2 order: 3 order: 4 } }
""" + LSTM % ("input_p", "match_p")


def test_frames_reshaped_after_the_permute_keep_four_axes():
    inferred = []
    summarize(FRAMES, strict=True, inferred=inferred)
    assert "input = 2 x 4 x 32 x 32, match = 2 x 4 x 32 x 32" in inferred[0]
    assert "sequence = 7 x 2" in inferred[0]


def test_volumes_fed_to_the_lstm_get_five_axes():
    inferred = []
    summarize(VOLUMES, strict=True, inferred=inferred)
    assert "input = 2 x 4 x 1 x 32 x 32, match = 2 x 4 x 1 x 32 x 32" in inferred[0]


TRANSPOSED_CONT = """
layer { name: "mnist" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 16 dim: 1 dim: 28 dim: 28 } shape { dim: 16 } } }
layer { name: "trans_data" type: "TensorTranspose" bottom: "data" top: "trans_data"
        tensor_transpose_param { order: 2 order: 0 order: 3 order: 1 } }
layer { name: "reshape_data" type: "Reshape" bottom: "trans_data" top: "seq"
        reshape_param { shape { dim: 28 dim: -1 dim: 28 } } }
layer { name: "cont" type: "HDF5Data" top: "cont"
        hdf5_data_param { source: "cont.txt" batch_size: 16 } }
layer { name: "trans_cont" type: "TensorTranspose" bottom: "cont" top: "trans_cont"
        tensor_transpose_param { order: 1 order: 0 } }
layer { name: "lstm" type: "LSTM" bottom: "seq" bottom: "trans_cont" top: "lstm"
        recurrent_param { num_output: 8 } }
layer { name: "last" type: "Slice" bottom: "lstm" top: "early" top: "final"
        slice_param { axis: 0 slice_point: 27 } }
layer { name: "silence" type: "Silence" bottom: "early" }
layer { name: "ip" type: "InnerProduct" bottom: "final" top: "ip"
        inner_product_param { num_output: 10 axis: 2 } }
layer { name: "flat" type: "Reshape" bottom: "ip" top: "logits"
        reshape_param { shape { dim: -1 dim: 10 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "logits" bottom: "label" top: "loss" }
"""


def test_an_hdf5_cont_takes_the_lstm_shape_through_a_tensor_transpose():
    """The MNIST-by-rows LSTM: an HDF5 file's continuation flags (N, T), turned time-major by the
    point-cloud forks' TensorTranspose, take the (T, N) the LSTM needs with the order undone."""
    inferred = []
    summarize(TRANSPOSED_CONT, strict=True, inferred=inferred)
    assert "cont = 16 x 28" in inferred[0]
    assert "through TensorTranspose layer 'trans_cont'" in inferred[0]
