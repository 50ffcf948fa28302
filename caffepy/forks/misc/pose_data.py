"""PoseData of the DeViSE forks (Qi-Xian/DeVise, gtlim/Ahra): ImageData whose list lines carry
an azimuth and an elevation; and its top shapes for caffepy.zoo."""
import numpy as np

from ...errors import CaffeError
from ...layers.base import register_layer
from ...layers.data_image import ImageDataLayer, _ImageListLoader


class _PoseListLoader(_ImageListLoader):
    label_item_shape = (2,)

    def __init__(self, param, transformer, what, reshuffle):
        self.reshuffle = reshuffle
        super().__init__(param, transformer, what)

    def read_list(self, param):
        try:
            with open(param.source) as f:
                lines = f.read().splitlines()
        except (IOError, OSError) as e:
            raise CaffeError("%s: cannot read the image list %s: %s"
                             % (self.what, param.source, e))
        out = []
        for number, line in enumerate(lines, 1):
            words = line.split()
            if not words:
                continue
            try:
                if len(words) != 3:
                    raise ValueError
                out.append((words[0], (float(words[1]), float(words[2]))))
            except ValueError:
                raise CaffeError("%s:%d: %s: expected '<image> <azimuth> <elevation>', got %r"
                                 % (param.source, number, self.what, line)) from None
        return out

    def _advance(self):
        self.pos += 1
        if self.pos >= len(self.lines):
            self.pos = 0
            if self.reshuffle:
                self._shuffle()


@register_layer("PoseData")
class PoseDataLayer(ImageDataLayer):
    """Images with two pose angles (Qi-Xian/DeVise, caffe/src/caffe/layers/pose_data_layer.cpp;
    gtlim/Ahra registers the type too). Each line of ``source`` is ``<image> <azimuth>
    <elevation>`` (white-space separated; a line of another form is an error, where the fork
    stops reading the list there); the image is ``root_folder + image``, read, resized and
    transformed as ImageData reads it. Tops: data (batch x C x H x W), azimuth (batch),
    elevation (batch). prototxt: ``pose_data_param { source batch_size: 1 shuffle: false
    rand_skip: 0 new_height: 0 new_width: 0 is_color: true root_folder: "" }`` and
    ``transform_param``; its ``scale``, ``mean_file``, ``crop_size`` and ``mirror`` are not read
    by the fork's layer (pose_data_layer.cpp reads the fields above; the transformer reads
    transform_param). The list is shuffled once with ``shuffle``; at the end of each pass it is
    shuffled again only when ``image_data_param.shuffle`` is set, the field the fork checks there.
    An image that cannot be read stops with one error (or is skipped under caffepy's bad-record
    policy), where the fork searches 100 lines on for a readable one.
    """
    exact_num_top_blobs = 3

    def make_loader(self, top):
        p = self.layer_param.pose_data_param
        if bool(p.new_height) != bool(p.new_width):
            raise self.error("new_height and new_width must be set together")
        if p.batch_size < 1:
            raise self.error("pose_data_param.batch_size must be positive")
        try:
            return _PoseListLoader(p, self.make_transformer(), self.describe(),
                                   bool(self.layer_param.image_data_param.shuffle))
        except CaffeError as e:
            raise e if self.describe() in str(e) else self.error(str(e))

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        n = top[0].shape[0]
        top[1].reshape((n,))
        top[2].reshape((n,))

    def forward_cpu(self, bottom, top):
        buf = self.prefetcher.next()
        try:
            top[0].reshape(buf["data"].shape)
            np.copyto(top[0].data, buf["data"])
            for i in (1, 2):
                top[i].reshape(buf["label"].shape[:1])
                top[i].data[...] = buf["label"][:, i - 1]
            self._data_state = buf["state"]
        finally:
            self.prefetcher.recycle(buf)


def top_shapes(lp, default_shape, batch_size=None):
    """The tops of a PoseData layer for caffepy.zoo: batch x C x H x W (C 1 when is_color is
    false, H x W from new_height / new_width, then transform_param.crop_size), batch, batch."""
    p = lp.pose_data_param
    n = int(batch_size) if batch_size is not None else int(p.batch_size or 1)
    c, h, w = default_shape
    if not p.is_color:
        c = 1
    if p.new_height and p.new_width:
        h, w = p.new_height, p.new_width
    if lp.transform_param.crop_size:
        h = w = lp.transform_param.crop_size
    return [(n, int(c), int(h), int(w)), (n,), (n,)][:len(lp.top)]
