"""FlowNet 2's CustomData on a tiny generated LMDB (two images, a UINT16FLOW flow, a BOOL1 mask)."""
import numpy as np
import pytest

from caffepy.data.db import LMDB, open_db
from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer

RNG = np.random.default_rng(5)
H, W = 3, 5


def sample(label):
    img0 = RNG.integers(0, 256, (3, H, W), dtype=np.uint8)
    img1 = RNG.integers(0, 256, (3, H, W), dtype=np.uint8)
    flow = RNG.integers(-2000, 2000, (2, H, W)).astype("<i2")
    flow[0, 0, 0] = 32767                                   # the fork's "no flow" value
    occ = RNG.integers(0, 2, (H, W)).astype(np.uint8)
    d = caffe_pb2.Datum(channels=9, height=H, width=W, label=label)
    d.data = (img0.tobytes() + img1.tobytes() + flow.tobytes()
              + np.packbits(occ.ravel(), bitorder="little").tobytes())
    return d, img0, img1, flow, occ


def make_db(path, n):
    out = []
    with open_db(str(path), LMDB, mode="w") as db:
        for i in range(n):
            d, *arrays = sample(label=10 + i)
            db.put("%08d" % i, d.SerializeToString())
            out.append(arrays)
    return out


TEXT = ('type: "CustomData" data_param { source: "%s" backend: LMDB batch_size: 2 '
        'slice_point: 3 slice_point: 6 slice_point: 8 encoding: UINT8 encoding: UINT8 '
        'encoding: UINT16FLOW encoding: BOOL1 subtract: 10 subtract: 20 subtract: 30 %s }')


def test_custom_data_decodes_each_slice(tmp_path):
    arrays = make_db(tmp_path / "db", 3)
    (tmp_path / "pre.list").write_text("1\n2\n1\n")
    layer = make_layer(TEXT % (tmp_path / "db", 'preselection_file: "%s" preselection_label: 1'
                               % (tmp_path / "pre.list")))
    top = make_blobs(5)
    layer.setup([], top)
    assert [t.shape for t in top] == [(2, 3, H, W), (2, 3, H, W), (2, 2, H, W), (2, 1, H, W),
                                      (2, 1, 1, 1)]
    layer.forward([], top)
    for b, entry in enumerate((0, 2)):                     # entries labelled 1 in the list
        img0, img1, flow, occ = arrays[entry]
        np.testing.assert_allclose(top[0].data[b], img0 - np.array([10, 20, 30.]).reshape(3, 1, 1))
        np.testing.assert_allclose(top[1].data[b], img1)
        want = flow / 32.0
        want[0, 0, 0] = np.nan
        np.testing.assert_allclose(top[2].data[b], want)
        np.testing.assert_allclose(top[3].data[b, 0], occ)
        assert top[4].data[b].ravel()[0] == 10 + entry
    layer.forward([], top)                                 # wraps around: entry 0 again
    np.testing.assert_allclose(top[1].data[0], arrays[0][1])


def test_custom_data_range_and_errors(tmp_path):
    make_db(tmp_path / "db", 4)
    order = "range_start: 1 range_end: 2 rand_permute: true rand_permute_seed: 77 %s"
    first_range = order % "rand_permute_order: FIRST_RANGE_THEN_PERMUTE"
    layer = make_layer(TEXT % (tmp_path / "db", first_range))
    layer.setup([], make_blobs(4))
    assert sorted(layer.order) == [1, 2]                   # entries 1..2, then shuffled
    layer = make_layer(TEXT % (tmp_path / "db", order % ""))
    layer.setup([], make_blobs(4))
    assert len(layer.order) == 2 and set(layer.order) <= {0, 1, 2, 3}   # shuffled, then cut
    with pytest.raises(CaffeError, match="tops for 4 slices"):
        make_layer(TEXT % (tmp_path / "db", "")).setup([], make_blobs(2))
    with pytest.raises(CaffeError, match="crop_size"):
        make_layer(TEXT % (tmp_path / "db", "crop_size: 2")).setup([], make_blobs(4))
