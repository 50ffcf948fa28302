"""The input-size search learning an open top's shape from the layer that rejects it, where both
bottoms a check compares are open tops of one reader."""
from caffepy.zoo.summary import summarize

MATTING = """
layer { name: "h5" type: "HDF5Data" top: "data" top: "tri-map" top: "alpha"
        hdf5_data_param { source: "train.txt" batch_size: 4 } }
layer { name: "concat" type: "Concat" bottom: "tri-map" bottom: "data" top: "both"
        concat_param { axis: 1 } }
layer { name: "conv" type: "Convolution" bottom: "both" top: "pred"
        convolution_param { num_output: 1 kernel_size: 3 pad: 1 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "pred" bottom: "alpha" top: "loss" }
"""


def test_a_guessed_vector_beside_an_image_takes_the_image_axes_not_the_reverse():
    """The tri-map read beside the image (matting nets): the Concat that joins them makes the
    guessed label vector a map of the image's size; the image keeps its four axes (before, the
    image was cut down to the vector's two and the convolution after it failed)."""
    inferred = []
    summarize(MATTING, strict=True, inferred=inferred)
    text = inferred[0]
    assert "data = 4 x 3 x " in text
    shape = text.split("tri-map = ")[1].split(",")[0].split(" x ")
    assert len(shape) == 4 and shape[0] == "4"
    assert "alpha = 4 x 1 x " in text


SIDE_OUTPUTS = """
layer { name: "data" type: "Data" top: "data" top: "label2"
        data_param { source: "train_lmdb" batch_size: 2 backend: LMDB } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "side"
        convolution_param { num_output: 1 kernel_size: 4 stride: 2 pad: 1 } }
layer { name: "crop" type: "Crop" bottom: "side" bottom: "label2" top: "side_crop" }
layer { name: "loss" type: "SigmoidCrossEntropyLoss" bottom: "side_crop" bottom: "label2"
        top: "loss" }
"""


def test_a_crop_reference_read_from_the_reader_takes_the_cropped_blobs_shape():
    """A side output cropped to a label map at half the image's size (saliency nets with
    label2 .. label32 beside the image): the guessed label vector, the Crop's reference, takes
    the shape of the blob it crops, which every check after it accepts."""
    inferred = []
    summarize(SIDE_OUTPUTS, strict=True, inferred=inferred)
    text = inferred[0]
    size = int(text.split("data = 2 x 3 x ")[1].split(" x ")[0])
    assert "label2 = 2 x 1 x %d x %d" % (size // 2, size // 2) in text
    assert "given the shape of side" in text
