"""The video readers of C3D (facebook/C3D) and TSN (yjxiong/caffe, action_recog branch):
``VideoData`` (C3D v1.0 files: V1 ``VIDEO_DATA``, upgraded to ``VideoData``) reading frame
images, decoded like ImageData's (``caffepy.data.image.read_image``: BGR uint8, OpenCV's
bilinear resize).

Which fork's reader a ``VideoData`` layer is: TSN's when ``video_data_param`` sets ``num_segments``,
``modality`` or ``name_pattern``; SSD's webcam / video-file reader when it sets ``video_type``,
``device_id`` or ``video_file`` (not supported: refused); C3D's otherwise (v1.1 reads
``video_data_param`` + ``transform_param``, v1.0 ``image_data_param`` with the transform inside).
"""
import numpy as np

from ... import common
from ...data.image import read_image, resize_bilinear
from ...data.state import ListLoaderState
from ...errors import CaffeError
from ...layers.base import register_layer
from ...layers.data import BasePrefetchingDataLayer


def _has(msg, name):
    return name in msg.DESCRIPTOR.fields_by_name and msg.HasField(name)


def _load_mean(path):
    from ...blob import Blob
    from ...proto import caffe_pb2, io as proto_io
    bp = proto_io.read_message(path, caffe_pb2.BlobProto())
    b = Blob(())
    b.from_proto(bp)
    return np.asarray(b.data, dtype=np.float64)


class _VideoLoader(ListLoaderState):
    def __init__(self, layer):
        self.what, self.dtype = layer.describe(), layer.dtype
        self.train = layer.phase == layer._caffe_pb2.TRAIN
        self.rng = np.random.default_rng(int(common.rng().integers(0, 2 ** 63)))
        self.shape = None

    def _frame(self, path, color):
        return read_image(path, self.new_h, self.new_w, color)

    def _advance(self):
        self.pos += 1
        if self.pos >= len(self.lines):
            self.pos = 0
            if self.shuffle:
                self.shuffle_lines()

    def data_shape(self):
        if self.shape is None:
            self.shape = (self.batch,) + self._item(self.pos, probe=True).shape
        return self.shape

    def load_batch(self, buf):
        shape = self.data_shape()
        if buf["data"].shape != shape:
            buf["data"] = np.zeros(shape, self.dtype)
        labels = np.zeros(self.label_shape, self.dtype)
        for b in range(self.batch):
            item = self._item(self.pos)
            if item.shape != shape[1:]:
                raise CaffeError("%s: clip %s gives %s, the batch %s (set new_height / new_width "
                                 "or crop_size)" % (self.what, self.lines[self.pos][0],
                                                    item.shape, shape[1:]))
            buf["data"][b] = item
            labels.reshape(self.batch, -1)[b, 0] = int(self.lines[self.pos][-1])
            self._advance()
        buf["label"] = labels


class _C3DLoader(_VideoLoader):
    """C3D: list lines ``<frame folder> <start frame> <label>``; frames ``%06d.jpg`` from the start,
    every ``sampling_rate``-th, ``new_length`` of them; (C, L, H, W) in BGR."""

    def __init__(self, layer):
        super().__init__(layer)
        lp = layer.layer_param
        v10 = not _has(lp, "video_data_param")
        p = lp.image_data_param if v10 else lp.video_data_param
        tp = lp.transform_param
        self.v10 = v10
        self.video = not p.use_image
        if getattr(p, "use_multiple_label", False):
            raise CaffeError("%s: use_multiple_label is not supported" % self.what)
        if not p.new_length:
            raise CaffeError("%s: new_length is required" % self.what)
        if bool(p.new_height) != bool(p.new_width):
            raise CaffeError("%s: new_height and new_width must be set together" % self.what)
        self.batch, self.length = int(p.batch_size), int(p.new_length)
        self.new_h, self.new_w = int(p.new_height), int(p.new_width)
        self.rate = int(p.sampling_rate) or 1
        self.root, self.shuffle, self.jitter = p.root_folder if not v10 else "", p.shuffle, \
            p.use_temporal_jitter
        src = p if v10 else tp
        self.crop, self.mirror, self.scale = int(src.crop_size), src.mirror, float(src.scale)
        self.mean = _load_mean(src.mean_file) if src.mean_file else None
        values = ([p.mean_value] if v10 and _has(p, "mean_value") else
                  [] if v10 else list(tp.mean_value))
        self.mean_values = np.asarray(values, dtype=np.float64)
        if self.mean is not None and self.mean_values.size:
            raise CaffeError("%s: mean_file and mean_value cannot both be set" % self.what)
        self.label_shape = (self.batch, 1, 1, 1, 1) if v10 else (self.batch,)
        if self.video and self.jitter and not v10:     # v1.1: '<video> <label>', random start
            self.read_lines(p.source, 2, "'<video file> <label>'")
            self.lines = [(name, "-1", label) for name, label in self.lines]
            self.remember_lines()
        else:
            self.read_lines(p.source, 3, "'<%s> <start frame> <label>'"
                            % ("video file" if self.video else "frame folder"))
        if self.shuffle:
            self.shuffle_lines()
        self.pos = int(self.rng.integers(0, p.rand_skip)) % len(self.lines) if p.rand_skip else 0

    def _video_frames(self, path, start):
        """C3D's ReadVideoToVolumeDatum with OpenCV's decoder: ``length`` frames from ``start``
        (-1: a random start, as use_temporal_jitter), every ``sampling_rate``-th."""
        try:
            import cv2
        except ImportError:
            raise CaffeError("%s: reading video files needs OpenCV: pip install caffepy[video]"
                             % self.what)
        cap = cv2.VideoCapture(path)
        try:
            if not cap.isOpened():
                raise CaffeError("%s: cannot open video %s" % (self.what, path))
            frames = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
            span = self.length * self.rate
            if frames < span:
                raise CaffeError("%s: %s has %d frames, fewer than new_length x sampling_rate"
                                 % (self.what, path, frames))
            if start < 0:
                start = int(self.rng.integers(0, frames - span + 1))
            if start + span > frames:
                raise CaffeError("%s: %s has %d frames; frames %d..%d were asked for"
                                 % (self.what, path, frames, start, start + span - 1))
            if start:
                cap.set(cv2.CAP_PROP_POS_FRAMES, start)
            out = []
            for f in range(start, start + span, self.rate):
                if self.rate > 1:
                    cap.set(cv2.CAP_PROP_POS_FRAMES, f)
                ok, img = cap.read()
                if not ok or img is None:
                    raise CaffeError("%s: %s has no data at frame %d" % (self.what, path, f))
                if self.new_h and self.new_w:
                    img = resize_bilinear(img, self.new_h, self.new_w)
                out.append(img)
            return out
        finally:
            cap.release()

    def _item(self, i, probe=False):
        folder, start, _ = self.lines[i]
        start = int(start)
        if self.video:
            frames = self._video_frames(self.root + folder, -1 if self.jitter else start)
            return self._transform(frames, probe)
        if self.v10 and self.jitter:     # v1.0: the second column counts the folder's frames
            span = self.length * self.rate
            if start < span:
                raise CaffeError("%s: %s has %d frames, fewer than new_length x sampling_rate"
                                 % (self.what, folder, start))
            start = int(self.rng.integers(0, start - span + 1)) + 1 if self.train else 0
        frames = [self._frame("%s%s/%06d.jpg" % (self.root, folder, f), True)
                  for f in range(start, start + self.length * self.rate, self.rate)]
        return self._transform(frames, probe)

    def _transform(self, frames, probe):
        clip = np.stack(frames).transpose(3, 0, 1, 2).astype(np.float64)    # C, L, H, W
        C, L, H, W = clip.shape
        mean = np.zeros_like(clip)
        if self.mean is not None:
            if self.mean.size != clip.size:
                raise CaffeError("%s: mean_file has %d values, a clip %d (C x L x H x W = %s)"
                                 % (self.what, self.mean.size, clip.size, (C, L, H, W)))
            mean = self.mean.reshape(clip.shape)
        elif self.mean_values.size:
            if self.mean_values.size not in (1, C):
                raise CaffeError("%s: give 1 or %d mean values" % (self.what, C))
            mean = np.broadcast_to(self.mean_values.reshape(-1, 1, 1, 1), clip.shape)
        y0 = x0 = 0
        h, w = H, W
        if self.crop:
            if self.crop > min(H, W):
                raise CaffeError("%s: crop_size %d is larger than the frames (%dx%d)"
                                 % (self.what, self.crop, H, W))
            h = w = self.crop
            if self.train and not probe:
                y0 = int(self.rng.integers(0, max(H - h + (0 if self.v10 else 1), 1)))
                x0 = int(self.rng.integers(0, max(W - w + (0 if self.v10 else 1), 1)))
            else:
                y0, x0 = (H - h) // 2, (W - w) // 2
        out = ((clip - mean)[:, :, y0:y0 + h, x0:x0 + w]) * self.scale
        if self.mirror and not probe and self.rng.integers(0, 2):     # in any phase (the fork)
            out = out[..., ::-1]
        return out


class _TSNLoader(_VideoLoader):
    """TSN: list lines ``<frame folder> <number of frames> <label>``; ``num_segments`` snippets
    of ``new_length`` frames each, stacked in the channels (RGB: 3 channels a frame, FLOW: the x
    then the y image, 1 channel each); name templates ``image_%04d.jpg`` / ``flow_%c_%04d.jpg``
    (``name_pattern``), frame numbers from 1."""

    def __init__(self, layer):
        super().__init__(layer)
        lp = layer.layer_param
        p, tp = lp.video_data_param, lp.transform_param
        self.flow = p.modality == p.FLOW
        self.pattern = p.name_pattern or ("flow_%c_%04d.jpg" if self.flow else "image_%04d.jpg")
        self.color = not p.grayscale
        self.batch, self.length = int(p.batch_size), int(p.new_length or 1)
        self.segments = int(p.num_segments or 1)
        self.new_h, self.new_w, self.shuffle = int(p.new_height), int(p.new_width), p.shuffle
        self.crop, self.mirror, self.scale = int(tp.crop_size), tp.mirror, float(tp.scale)
        self.fix_crop, self.more_fix_crop = tp.fix_crop, tp.more_fix_crop
        self.multi_scale, self.max_distort = tp.multi_scale, int(tp.max_distort)
        self.ratios = list(tp.scale_ratios) or [1.0, .875, .75, .66]
        self.is_flow = tp.is_flow
        if tp.original_image:
            raise CaffeError("%s: original_image crops are not supported" % self.what)
        self.mean = _load_mean(tp.mean_file) if tp.mean_file else None
        self.mean_values = np.asarray(tp.mean_value, dtype=np.float64)
        self.label_shape = (self.batch, 1, 1, 1)
        self.read_lines(p.source, 3, "'<frame folder> <number of frames> <label>'")
        if self.shuffle:
            self.shuffle_lines()
        self.pos = 0

    def _offsets(self, frames):
        avg = frames // self.segments
        out = []
        for i in range(self.segments):
            if avg < self.length:
                out.append(0)
            elif self.train:
                out.append(int(self.rng.integers(0, avg - self.length + 1)) + i * avg)
            else:
                out.append((avg - self.length + 1) // 2 + i * avg)
        return out

    def _read(self, folder, offsets):
        planes = []
        for off in offsets:
            for f in range(1, self.length + 1):
                if self.flow:
                    for axis in "xy":
                        name = self.pattern % (axis, f + off)
                        planes.append(self._frame("%s/%s" % (folder, name), False)[:, :, 0])
                else:
                    img = self._frame("%s/%s" % (folder, self.pattern % (f + off)), self.color)
                    planes.extend(img.transpose(2, 0, 1))
        return np.stack(planes)                                 # (channels, H, W) uint8

    def _crop_box(self, H, W):
        c = self.crop
        if not self.train:
            return c, c, (H - c) // 2, (W - c) // 2
        ch = cw = c
        if self.multi_scale:
            base = min(H, W)
            sizes = []
            for i, rh in enumerate(self.ratios):
                for j, rw in enumerate(self.ratios):
                    if abs(i - j) <= self.max_distort:
                        h, w = int(base * rh), int(base * rw)
                        sizes.append((c if abs(h - c) < 3 else h, c if abs(w - c) < 3 else w))
            ch, cw = sizes[int(self.rng.integers(0, len(sizes)))]
        if self.fix_crop:
            hq, wq = (H - ch) // 4, (W - cw) // 4
            pts = [(0, 0), (0, 4), (4, 0), (4, 4), (2, 2)]
            if self.more_fix_crop:
                pts += [(0, 2), (4, 2), (2, 0), (2, 4), (1, 1), (1, 3), (3, 1), (3, 3)]
            a, b = pts[int(self.rng.integers(0, len(pts)))]
            return ch, cw, a * hq, b * wq
        return ch, cw, int(self.rng.integers(0, H - ch + 1)), int(self.rng.integers(0, W - cw + 1))

    def _item(self, i, probe=False):
        folder, frames, _ = self.lines[i]
        data = self._read(folder, self._offsets(int(frames)))
        C, H, W = data.shape
        if self.crop and self.crop > min(H, W):
            raise CaffeError("%s: crop_size %d is larger than the frames (%dx%d)"
                             % (self.what, self.crop, H, W))
        if probe:
            return np.zeros((C,) + ((self.crop, self.crop) if self.crop else (H, W)))
        mean = np.zeros((C, 1, 1))
        if self.mean is not None:
            if self.mean.size != data.size:
                raise CaffeError("%s: mean_file has %d values, the frames %d"
                                 % (self.what, self.mean.size, data.size))
            mean = self.mean.reshape(data.shape)
        elif self.mean_values.size:
            if C % self.mean_values.size:
                raise CaffeError("%s: %d mean values do not divide %d channels"
                                 % (self.what, self.mean_values.size, C))
            mean = np.resize(self.mean_values, C).reshape(C, 1, 1)   # the group repeated
        mirror = bool(self.mirror and self.rng.integers(0, 2))
        if self.crop:
            ch, cw, y0, x0 = self._crop_box(H, W)
            part = data[:, y0:y0 + ch, x0:x0 + cw]
            resized = (ch, cw) != (self.crop, self.crop)
            if resized:
                part = resize_bilinear(part.transpose(1, 2, 0), self.crop, self.crop)
                part = part.reshape(self.crop, self.crop, C).transpose(2, 0, 1)
            m = mean if mean.shape[1:] == (1, 1) else (
                mean[:, :self.crop, :self.crop] if resized else mean[:, y0:y0 + ch, x0:x0 + cw])
        else:
            part, m = data, mean
        x = part.astype(np.float64)
        if mirror:
            x = x[:, :, ::-1]
            if self.is_flow:
                x[0::2] = 255 - x[0::2]
        return (x - m) * self.scale


@register_layer("VideoData")
class VideoDataLayer(BasePrefetchingDataLayer):
    """C3D's and TSN's video readers (see the module doc for which one a layer is).

    C3D (``video_data_param`` v1.1 / ``image_data_param`` v1.0 { source batch_size new_length
    new_height new_width use_image sampling_rate: 1 shuffle rand_skip root_folder (v1.1) }
    with ``transform_param { crop_size mirror mean_file mean_value scale }`` (v1.1) or those fields
    in image_data_param (v1.0: one ``mean_value``; the mean is always subtracted)):
    clip = frames start, start + r, ... (``%06d.jpg``), (x - mean) * scale, crop (random in TRAIN,
    centred otherwise), mirror (random, in every phase as the fork). With v1.0's
    ``use_temporal_jitter`` the list's second column is the folder's frame count and the start is
    random in TRAIN, 0 otherwise. ``use_image: false``: list lines ``<video> <start frame>
    <label>`` (v1.1 with ``use_temporal_jitter``: ``<video> <label>``; with the jitter the start
    is random, in any phase, as the fork's -1), frames decoded by OpenCV (the ``video`` extra).
    Tops: data (N, C, L, h, w), label (N,) (v1.1) or (N, 1, 1, 1, 1) (v1.0).

    TSN (``video_data_param { source batch_size new_length: 1 num_segments: 1 modality: FLOW
    name_pattern new_height new_width grayscale shuffle }`` + ``transform_param { crop_size
    mirror mean_value mean_file scale is_flow fix_crop more_fix_crop multi_scale scale_ratios
    max_distort }``): segment offsets (random in each segment in TRAIN, centred otherwise), the
    frames stacked in the channels; crop (TRAIN: multi-scale sizes from the shorter side times
    the ratios, pairs within ``max_distort``, at fixed or random positions, resized to crop_size;
    centred otherwise); random mirror (with ``is_flow`` the x planes become 255 - v); mean values
    repeated over the channels. Tops: data (N, S L C, h, w), label (N, 1, 1, 1).
    """
    exact_num_top_blobs = None
    min_top_blobs, max_top_blobs = 1, 2

    def make_loader(self, top):
        lp = self.layer_param
        vdp = lp.video_data_param
        if any(_has(vdp, n) for n in ("video_type", "device_id", "video_file")):
            raise self.error("SSD's webcam / video-file VideoData reader is not supported")
        tsn = any(_has(vdp, n) for n in ("num_segments", "modality", "name_pattern"))
        try:
            loader = _TSNLoader(self) if tsn else _C3DLoader(self)
            if loader.batch < 1:
                raise CaffeError("batch_size must be positive")
            return loader
        except CaffeError as e:
            raise e if str(e).startswith(self.describe()) else self.error(str(e))

    def layer_setup(self, bottom, top):
        super().layer_setup(bottom, top)
        if self.output_labels:
            top[1].reshape(self.prefetcher_label_shape)

    def _start(self, loader, top):
        self.prefetcher_label_shape = loader.label_shape
        super()._start(loader, top)
