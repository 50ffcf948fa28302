"""DeepLab's MatWrite: each forward writes its bottoms to MATLAB .mat files."""
import os

import numpy as np

from ...layers.base import Layer, register_layer


@register_layer("MatWrite")
class MatWriteLayer(Layer):
    """Writes every bottom to a MATLAB v5 file (DeepLab's Caffe, src/caffe/layers/mat_write_layer.cpp).

    Forward number k (counted by the layer from 0) writes, when k % period == 0, one file per
    bottom i: ``<prefix><name>_blob_<i>.mat``, where name is line k of ``source`` (its first word,
    ``strip`` characters cut off its end) or ``iter_<k>`` without a source. A forward past the
    source's last line is an error. The file holds one variable, ``data``: the blob as DeepLab's
    ``Blob::ToMat`` stores it, a width x height x channels x num array (MATLAB's column-major
    reading of the N x C x H x W memory, with the legacy accessors' 1 for the axes a blob of fewer
    than 4 has; single for a float32 net, double for float64). Written with scipy.io.savemat
    (MATLAB v5, uncompressed, as DeepLab's ``Mat_Create``).

    prototxt: ``mat_write_param { prefix: "out/" source: "" strip: 0 period: 1 }``.
    Bottoms: one or more blobs. No tops; no backward.
    """
    min_bottom_blobs = 1
    exact_num_top_blobs = 0

    def layer_setup(self, bottom, top):
        p = self.layer_param.mat_write_param
        self.prefix, self.period, self.iter = p.prefix, p.period, 0
        if self.period <= 0:
            raise self.error("period must be positive (got %d)" % self.period)
        if p.strip < 0:
            raise self.error("strip cannot be negative (got %d)" % p.strip)
        self.names = None
        if p.HasField("source"):
            try:
                with open(p.source) as f:
                    words = [line.split()[0] for line in f if line.split()]
            except OSError as e:
                raise self.error("cannot read source %s: %s" % (p.source, e.strerror))
            short = [w for w in words if len(w) <= p.strip]
            if short:
                raise self.error("strip %d removes all of '%s'" % (p.strip, short[0]))
            self.names = [w[:len(w) - p.strip] for w in words]

    def reshape(self, bottom, top):
        pass

    def forward_cpu(self, bottom, top):
        if self.iter % self.period == 0:
            from scipy.io import savemat
            if self.names is None:
                name = "iter_%d" % self.iter
            elif self.iter < len(self.names):
                name = self.names[self.iter]
            else:
                raise self.error("forward %d is past the %d names of the source"
                                 % (self.iter, len(self.names)))
            for i, b in enumerate(bottom):
                path = "%s%s_blob_%d.mat" % (self.prefix, name, i)
                d = os.path.dirname(path)
                if d:
                    os.makedirs(d, exist_ok=True)
                data = np.asarray(b.data, dtype=self.dtype)
                if data.ndim < 4:       # the legacy num / channels / height / width, 1 if absent
                    data = data.reshape(data.shape + (1,) * (4 - data.ndim))
                savemat(path, {"data": data.T})
        self.iter += 1

    def backward_cpu(self, top, propagate_down, bottom):
        """No gradient."""
