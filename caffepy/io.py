"""pycaffe's ``caffe.io``: images in, preprocessed blobs out, and array <-> protobuf conversion.

Images are H x W x K float32 arrays in [0, 1], RGB, as pycaffe (scikit-image) gives them; Pillow
reads the files. :class:`Transformer` turns such an image into a K x H x W net input (resize,
transpose, channel swap, raw scale, mean subtraction, input scale, in pycaffe's order) and back.

* ``load_image(filename, color=True)`` -> H x W x 3 (RGB) or H x W x 1 (``color=False``: the
  luminance 0.2125 R + 0.7154 G + 0.0721 B, as skimage's rgb2gray).
* ``resize_image(im, new_dims, interp_order=1)`` -> new_dims[0] x new_dims[1] x K float32;
  order 0 nearest, 1 bilinear (pixel centres aligned, edges clamped); a constant image stays
  constant; other orders use scipy.ndimage.zoom when scipy is installed.
* ``oversample(images, crop_dims)`` -> 10 crops per image: four corners and the centre, then
  the same five mirrored left-right.
* ``blobproto_to_array`` / ``array_to_blobproto``, ``arraylist_to_blobprotovector_str`` /
  ``blobprotovector_str_to_arraylist``, ``array_to_datum`` / ``datum_to_array``.
"""
import numpy as np

from .data.datum import array_to_datum  # noqa: F401  (pycaffe's caffe.io.array_to_datum)
from .data.datum import datum_to_array as _datum_to_array
from .errors import CaffeError
from .proto import caffe_pb2

__all__ = ["blobproto_to_array", "array_to_blobproto", "arraylist_to_blobprotovector_str",
           "arraylist_to_blobprotovecor_str", "blobprotovector_str_to_arraylist", "array_to_datum",
           "datum_to_array", "Transformer", "load_image", "resize_image", "oversample"]


# -- protobuf <-> ndarray --------------------------------------------------------------------------
def blobproto_to_array(blob, return_diff=False):
    """The data (or diff) of a BlobProto as an array of its shape (legacy 4-d fields or shape.dim).

    A blob without any shape gives a 0-d array when it holds one value; otherwise ValueError.
    """
    values = blob.diff if return_diff else blob.data
    if not len(values):
        values = blob.double_diff if return_diff else blob.double_data
    data = np.array(values)
    if any(blob.HasField(f) for f in ("num", "channels", "height", "width")):
        return data.reshape(blob.num, blob.channels, blob.height, blob.width)
    return data.reshape(tuple(blob.shape.dim))


def array_to_blobproto(arr, diff=None):
    """A BlobProto with ``shape.dim`` = arr.shape and float data (and diff when given)."""
    arr = np.asarray(arr)
    blob = caffe_pb2.BlobProto()
    blob.shape.dim.extend(int(d) for d in arr.shape)
    blob.data.extend(arr.astype(float).ravel())
    if diff is not None:
        diff = np.asarray(diff)
        if diff.shape != arr.shape:
            raise ValueError("array_to_blobproto: diff shape %s differs from data shape %s"
                             % (diff.shape, arr.shape))
        blob.diff.extend(diff.astype(float).ravel())
    return blob


def arraylist_to_blobprotovector_str(arraylist):
    """Serialized BlobProtoVector of the arrays."""
    vec = caffe_pb2.BlobProtoVector()
    vec.blobs.extend(array_to_blobproto(a) for a in arraylist)
    return vec.SerializeToString()


arraylist_to_blobprotovecor_str = arraylist_to_blobprotovector_str  # pycaffe's spelling


def blobprotovector_str_to_arraylist(data):
    """The arrays of a serialized BlobProtoVector."""
    vec = caffe_pb2.BlobProtoVector()
    vec.ParseFromString(data)
    return [blobproto_to_array(b) for b in vec.blobs]


def datum_to_array(datum):
    """C x H x W array of a Datum: uint8 from ``data``, float64 from ``float_data`` (label not
    included; encoded datums are decoded to C x H x W uint8, BGR as Caffe stores them)."""
    arr = _datum_to_array(datum)
    return arr if arr.dtype == np.uint8 else arr.astype(float)


# -- preprocessing ---------------------------------------------------------------------------------
class Transformer(object):
    """Prepare H x W x K images for a net's inputs (pycaffe's ``caffe.io.Transformer``).

    ``inputs``: {input name: blob shape}, e.g. ``{'data': net.blobs['data'].data.shape}``.
    ``preprocess`` does, for each step configured: resize to the blob's H x W, transpose (e.g.
    (2, 0, 1) for K x H x W), channel swap (e.g. (2, 1, 0) for RGB -> BGR), multiply by raw_scale,
    subtract the mean, multiply by input_scale. ``deprocess`` undoes them in reverse order.
    """

    def __init__(self, inputs):
        self.inputs = {name: tuple(int(d) for d in shape) for name, shape in inputs.items()}
        self.transpose = {}
        self.channel_swap = {}
        self.raw_scale = {}
        self.mean = {}
        self.input_scale = {}

    def _check(self, in_):
        if in_ not in self.inputs:
            raise CaffeError("Transformer: '%s' is not one of the net inputs: %s"
                             % (in_, sorted(self.inputs)))

    def preprocess(self, in_, data):
        """H' x W' x K image -> K x H x W float32 net input."""
        self._check(in_)
        caffe_in = np.asarray(data).astype(np.float32, copy=True)
        in_dims = self.inputs[in_][2:]
        if caffe_in.shape[:2] != tuple(in_dims):
            caffe_in = resize_image(caffe_in, in_dims)
        transpose = self.transpose.get(in_)
        if transpose is not None:
            caffe_in = caffe_in.transpose(transpose)
        channel_swap = self.channel_swap.get(in_)
        if channel_swap is not None:
            caffe_in = caffe_in[list(channel_swap), :, :]
        if self.raw_scale.get(in_) is not None:
            caffe_in *= self.raw_scale[in_]
        if self.mean.get(in_) is not None:
            caffe_in -= self.mean[in_]
        if self.input_scale.get(in_) is not None:
            caffe_in *= self.input_scale[in_]
        return caffe_in

    def deprocess(self, in_, data):
        """Invert :meth:`preprocess` (except the resize): K x H x W -> H x W x K."""
        self._check(in_)
        decaf_in = np.array(data, dtype=np.float32).squeeze()
        if self.input_scale.get(in_) is not None:
            decaf_in /= self.input_scale[in_]
        if self.mean.get(in_) is not None:
            decaf_in += self.mean[in_]
        if self.raw_scale.get(in_) is not None:
            decaf_in /= self.raw_scale[in_]
        channel_swap = self.channel_swap.get(in_)
        if channel_swap is not None:
            decaf_in = decaf_in[np.argsort(channel_swap), :, :]
        transpose = self.transpose.get(in_)
        if transpose is not None:
            decaf_in = decaf_in.transpose(np.argsort(transpose))
        return decaf_in

    def set_transpose(self, in_, order):
        """Axis order applied to the H x W x K image, e.g. (2, 0, 1)."""
        self._check(in_)
        if len(order) != len(self.inputs[in_]) - 1:
            raise CaffeError("Transformer.set_transpose('%s'): order %s needs %d axes, as the input "
                             "without its batch axis" % (in_, tuple(order), len(self.inputs[in_]) - 1))
        self.transpose[in_] = tuple(order)

    def set_channel_swap(self, in_, order):
        """Channel order after transpose, e.g. (2, 1, 0) for RGB -> BGR."""
        self._check(in_)
        if len(order) != self.inputs[in_][1]:
            raise CaffeError("Transformer.set_channel_swap('%s'): order %s must list the %d input "
                             "channels" % (in_, tuple(order), self.inputs[in_][1]))
        self.channel_swap[in_] = tuple(order)

    def set_raw_scale(self, in_, scale):
        """Scale applied before mean subtraction (255 for models trained on [0, 255] pixels)."""
        self._check(in_)
        self.raw_scale[in_] = scale

    def set_mean(self, in_, mean):
        """Mean to subtract: K values (per channel) or a K x H x W array (resized if needed)."""
        self._check(in_)
        mean = np.asarray(mean, dtype=np.float32)
        want = self.inputs[in_][1:]
        if mean.ndim == 1:
            if mean.shape[0] != want[0]:
                raise CaffeError("Transformer.set_mean('%s'): %d mean values for %d channels"
                                 % (in_, mean.shape[0], want[0]))
            mean = mean[:, None, None]
        else:
            if mean.ndim == 2:
                mean = mean[None]
            if mean.ndim != 3 or mean.shape[0] != want[0]:
                raise CaffeError("Transformer.set_mean('%s'): mean shape %s is incompatible with "
                                 "input shape %s" % (in_, mean.shape, want))
            if mean.shape[1:] != tuple(want[1:]):
                mean = resize_image(mean.transpose(1, 2, 0), want[1:]).transpose(2, 0, 1)
        self.mean[in_] = mean

    def set_input_scale(self, in_, scale):
        """Scale applied last, after mean subtraction."""
        self._check(in_)
        self.input_scale[in_] = scale


# -- images ----------------------------------------------------------------------------------------
_GRAY = np.array([0.2125, 0.7154, 0.0721], dtype=np.float64)


def load_image(filename, color=True):
    """Read an image file as float32 in [0, 1]: H x W x 3 RGB, or H x W x 1 when ``color`` is false."""
    from .data.image import open_image
    im = open_image(filename, "load_image: %s" % filename, missing="no such file")
    if im.mode in ("I;16", "I;16B", "I;16L", "I"):
        img = np.asarray(im, dtype=np.float64) / (65535.0 if im.mode.startswith("I;16") else 2 ** 31 - 1)
    elif im.mode == "F":
        img = np.asarray(im, dtype=np.float64)
    elif im.mode in ("L", "1", "P", "LA"):
        img = np.asarray(im.convert("L" if im.mode != "P" else "RGB"), dtype=np.float64) / 255.0
    else:
        img = np.asarray(im.convert("RGB"), dtype=np.float64) / 255.0
    if img.ndim == 3 and not color:
        img = img[:, :, :3] @ _GRAY
    if img.ndim == 2:
        img = img[:, :, None]
        if color:
            img = np.tile(img, (1, 1, 3))
    return img.astype(np.float32)


def _linear_axis(src, dst):
    """Source indices and weights for linear resampling of an axis of ``src`` to ``dst`` pixels."""
    pos = (np.arange(dst, dtype=np.float64) + 0.5) * (src / float(dst)) - 0.5
    pos = np.clip(pos, 0, src - 1)
    i0 = np.floor(pos).astype(np.int64)
    i1 = np.minimum(i0 + 1, src - 1)
    return i0, i1, (pos - i0)


def resize_image(im, new_dims, interp_order=1):
    """Resize an H x W x K array to ``new_dims`` (height, width) with interpolation (float32 out)."""
    im = np.asarray(im)
    if im.ndim != 3:
        raise CaffeError("resize_image: expected an H x W x K array, got shape %s" % (im.shape,))
    h, w = int(new_dims[0]), int(new_dims[1])
    if im.size and im.min() == im.max():
        return np.full((h, w, im.shape[2]), im.flat[0], dtype=np.float32)
    src = im.astype(np.float64)
    if interp_order == 0:
        rows = np.minimum(((np.arange(h) + 0.5) * im.shape[0] / h).astype(np.int64), im.shape[0] - 1)
        cols = np.minimum(((np.arange(w) + 0.5) * im.shape[1] / w).astype(np.int64), im.shape[1] - 1)
        return src[rows][:, cols].astype(np.float32)
    if interp_order == 1:
        y0, y1, fy = _linear_axis(im.shape[0], h)
        x0, x1, fx = _linear_axis(im.shape[1], w)
        rows = src[y0] * (1 - fy)[:, None, None] + src[y1] * fy[:, None, None]
        out = rows[:, x0] * (1 - fx)[None, :, None] + rows[:, x1] * fx[None, :, None]
        return out.astype(np.float32)
    try:
        from scipy.ndimage import zoom
    except ImportError:
        raise CaffeError("resize_image: interp_order %d needs scipy (orders 0 and 1 do not)" % interp_order)
    scale = (h / float(im.shape[0]), w / float(im.shape[1]), 1.0)
    return zoom(src, scale, order=interp_order).astype(np.float32)


def oversample(images, crop_dims):
    """10 crops per H x W x K image: corners + centre, then their mirrors (10N x h x w x K)."""
    images = [np.asarray(im) for im in images]
    if not images:
        raise CaffeError("oversample: no images")
    im_shape = np.array(images[0].shape)
    crop_dims = np.array(crop_dims, dtype=np.int64)
    if np.any(crop_dims > im_shape[:2]):
        raise CaffeError("oversample: crop %s is larger than the images %s"
                         % (tuple(crop_dims), tuple(im_shape[:2])))
    corners = [(i, j) for i in (0, im_shape[0] - crop_dims[0]) for j in (0, im_shape[1] - crop_dims[1])]
    center = np.floor(im_shape[:2] / 2.0 - crop_dims / 2.0).astype(np.int64)
    starts = corners + [tuple(center)]
    crops = np.empty((10 * len(images), crop_dims[0], crop_dims[1], im_shape[-1]), dtype=np.float32)
    ix = 0
    for im in images:
        for i, j in starts:
            crops[ix] = im[i:i + crop_dims[0], j:j + crop_dims[1], :]
            ix += 1
        crops[ix:ix + 5] = crops[ix - 5:ix, :, ::-1, :]
        ix += 5
    return crops
