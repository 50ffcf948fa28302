"""pycaffe's ``caffe.Classifier``: a Net that classifies H x W x K images.

::

    net = caffepy.Classifier("deploy.prototxt", "weights.caffemodel", image_dims=(256, 256),
                             mean=np.array([104, 117, 123]), raw_scale=255, channel_swap=(2, 1, 0))
    probs = net.predict([caffepy.io.load_image("cat.jpg")])        # N x classes

``predict(inputs, oversample=True)`` resizes each image to ``image_dims`` (default: the input
blob's H x W), takes ten crops of the input blob's size (corners, centre and their mirrors) and
averages the ten predictions, or with ``oversample=False`` the centre crop only; crops are
preprocessed by ``self.transformer`` (:class:`caffepy.io.Transformer`) and run with
``forward_all``. The prediction is the net's first output. ``optimize=True`` runs the net in
inference mode with the default engine, ``optimize="onnxruntime"`` / ``"openvino"`` /
``"caffepy"`` with that one (caffepy.infer.engine).
"""
import numpy as np

from .. import io as caffe_io
from ..net import Net
from ..proto import caffe_pb2


def input_transformer(net, mean=None, input_scale=None, raw_scale=None, channel_swap=None):
    """A Transformer for ``net``'s first input: H x W x K images transposed to K x H x W, with the
    optional mean, input_scale, raw_scale and channel_swap (shared by Classifier and Detector)."""
    in_ = net.inputs[0]
    transformer = caffe_io.Transformer({in_: net.blobs[in_].data.shape})
    transformer.set_transpose(in_, (2, 0, 1))
    if mean is not None:
        transformer.set_mean(in_, mean)
    if input_scale is not None:
        transformer.set_input_scale(in_, input_scale)
    if raw_scale is not None:
        transformer.set_raw_scale(in_, raw_scale)
    if channel_swap is not None:
        transformer.set_channel_swap(in_, channel_swap)
    return transformer


class Classifier(Net):
    def __init__(self, model_file, pretrained_file, image_dims=None, mean=None, input_scale=None,
                 raw_scale=None, channel_swap=None, optimize=False):
        Net.__init__(self, model_file, pretrained_file, caffe_pb2.TEST, optimize=optimize)
        in_ = self.inputs[0]
        self.transformer = input_transformer(self, mean, input_scale, raw_scale, channel_swap)
        self.crop_dims = np.array(self.blobs[in_].data.shape[2:])
        self.image_dims = np.array(image_dims if image_dims is not None else self.crop_dims)

    def predict(self, inputs, oversample=True):
        """Class scores (N x classes) for a list of H x W x K images."""
        inputs = [np.asarray(im) for im in inputs]
        batch = np.zeros((len(inputs), int(self.image_dims[0]), int(self.image_dims[1]),
                          inputs[0].shape[2]), dtype=np.float32)
        for ix, im in enumerate(inputs):
            batch[ix] = caffe_io.resize_image(im, self.image_dims)
        if oversample:
            batch = caffe_io.oversample(batch, self.crop_dims)
        else:
            start = np.floor(self.image_dims / 2.0 - self.crop_dims / 2.0).astype(int)
            stop = start + self.crop_dims
            batch = batch[:, start[0]:stop[0], start[1]:stop[1], :]
        in_ = self.inputs[0]
        caffe_in = np.stack([self.transformer.preprocess(in_, crop) for crop in batch])
        predictions = self.forward_all(**{in_: caffe_in})[self.outputs[0]]
        if oversample:
            predictions = predictions.reshape((len(predictions) // 10, 10, -1)).mean(axis=1)
        return predictions
