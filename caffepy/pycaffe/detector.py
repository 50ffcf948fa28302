"""pycaffe's ``caffe.Detector``: classify windows of images (R-CNN style).

``detect_windows([(image_path, [(ymin, xmin, ymax, xmax), ...]), ...])`` crops each window (with
``context_pad`` pixels of context, as R-CNN: the window is grown so that after warping to the input
size it has that much padding, mean-filled where it leaves the image), warps it to the input
blob's size, preprocesses it with ``self.transformer`` and returns
``[{'window': ..., 'prediction': scores, 'filename': ...}]``.
``detect_selective_search`` needs the external selective-search MATLAB code and raises a
one-line error naming it when that module is missing. ``optimize``: as for
:class:`caffepy.Classifier` (True, or an inference engine's name).
"""
import os

import numpy as np

from .. import io as caffe_io
from .classifier import input_transformer
from ..errors import CaffeError
from ..net import Net
from ..proto import caffe_pb2


class Detector(Net):
    def __init__(self, model_file, pretrained_file, mean=None, input_scale=None, raw_scale=None,
                 channel_swap=None, context_pad=None, optimize=False):
        Net.__init__(self, model_file, pretrained_file, caffe_pb2.TEST, optimize=optimize)
        self.transformer = input_transformer(self, mean, input_scale, raw_scale, channel_swap)
        self.configure_crop(context_pad)

    def detect_windows(self, images_windows):
        """Scores for every (image, window) pair, in order."""
        images_windows = [(fname, list(windows)) for fname, windows in images_windows]
        crops = []
        for fname, windows in images_windows:
            image = caffe_io.load_image(fname).astype(np.float32)
            for window in windows:
                crops.append(self.crop(image, window))
        in_ = self.inputs[0]
        if not crops:
            return []
        caffe_in = np.stack([self.transformer.preprocess(in_, c) for c in crops])
        predictions = self.forward_all(**{in_: caffe_in})[self.outputs[0]]
        predictions = predictions.reshape(len(predictions), -1)
        detections, ix = [], 0
        for fname, windows in images_windows:
            for window in windows:
                detections.append({"window": window, "prediction": predictions[ix], "filename": fname})
                ix += 1
        return detections

    def detect_selective_search(self, image_fnames):
        """Detect over Selective Search proposals (needs selective_search_ijcv_with_python)."""
        try:
            import selective_search_ijcv_with_python as selective_search
        except ImportError:
            raise CaffeError("detect_selective_search needs the selective_search_ijcv_with_python "
                             "module (and MATLAB); use detect_windows with your own proposals")
        image_fnames = [os.path.abspath(f) for f in image_fnames]
        windows_list = selective_search.get_windows(image_fnames, cmd="selective_search_rcnn")
        return self.detect_windows(zip(image_fnames, windows_list))

    def crop(self, im, window):
        """The window (ymin, xmin, ymax, xmax) of ``im``, with context padding when configured."""
        window = np.asarray(window)
        crop = im[window[0]:window[2], window[1]:window[3]]
        if not self.context_pad:
            return crop
        box = window.astype(np.float64)
        crop_size = self.blobs[self.inputs[0]].width
        scale = crop_size / (crop_size - 2.0 * self.context_pad)
        center = np.array([(box[0] + box[2]) / 2.0, (box[1] + box[3]) / 2.0])
        half = np.array([box[2] - box[0], box[3] - box[1]]) * scale / 2.0
        full = np.round(np.concatenate([center - half, center + half])).astype(int)
        clipped = np.clip(full, 0, np.tile(im.shape[:2], 2))
        crop_h, crop_w = full[2] - full[0], full[3] - full[1]
        context = np.ones((crop_h, crop_w, im.shape[2]), dtype=np.float32) * self.crop_mean
        y0, x0 = clipped[0] - full[0], clipped[1] - full[1]
        patch = im[clipped[0]:clipped[2], clipped[1]:clipped[3]]
        context[y0:y0 + patch.shape[0], x0:x0 + patch.shape[1]] = patch
        return context

    def configure_crop(self, context_pad):
        """Set context padding; the padding is filled with the mean in image space."""
        self.context_pad = context_pad
        self.crop_mean = 0.0
        if context_pad:
            in_ = self.inputs[0]
            t = self.transformer
            mean = t.mean.get(in_)
            if mean is None:
                return
            mean = np.asarray(mean, dtype=np.float32)
            if mean.shape[1:] != (1, 1):
                mean = mean.mean(axis=(1, 2), keepdims=True)
            raw = t.raw_scale.get(in_) or 1.0
            pixel = mean.reshape(-1) / raw
            if t.channel_swap.get(in_) is not None:
                pixel = pixel[np.argsort(t.channel_swap[in_])]
            self.crop_mean = pixel
