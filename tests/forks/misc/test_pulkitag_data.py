import numpy as np
import pytest

from caffepy import zoo
from caffepy.data.image import resize_bilinear
from caffepy.errors import CaffeError, NetError
from caffepy.net import Net
from caffepy.proto import caffe_pb2, io as proto_io
from caffepy.testing import make_blobs, make_layer

PIL = pytest.importorskip("PIL.Image")


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    images = []
    for i in range(3):
        rgb = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
        PIL.fromarray(rgb).save(str(tmp_path / ("im%d.png" % i)))
        images.append(rgb[:, :, ::-1])                       # BGR, as read
    labels = rng.standard_normal((3, 4)).astype(np.float32)
    lines = ["# GenericDataLayer", "3", "2", "4"]
    for k in range(3):
        lines += ["# %d" % k, "im%d.png 3 40 50 2 3 17 18" % k,
                  "im%d.png 3 40 50 10 20 25 35" % ((k + 1) % 3),
                  " ".join("%r" % float(v) for v in labels[k])]
    (tmp_path / "win.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "sq.txt").write_text("# SqBoxWindowDataLayer 2\n# 0 2 im0.png 3 40 50\n"
                                     "20 20 20 20 10\n30 10 30 10 8\n# 1 1 im1.png 3 40 50\n"
                                     "25 20 25 20 12\n")
    return tmp_path, images, labels


def _run(text, batches=1):
    layer = make_layer(text)
    top = make_blobs(2)
    layer.setup([], top)
    shapes = [t.shape for t in top]
    out = []
    for _ in range(batches):
        layer.forward([], top)
        out.append([t.data.copy() for t in top])
    layer.close()
    return shapes, out


def _generic(d, extra=""):
    return ('type: "GenericWindowData" generic_window_data_param { source: "%s/win.txt" '
            'root_folder: "%s/" crop_size: 16 batch_size: 4 %s }' % (d, d, extra))


def test_fields_parse():
    lp = proto_io.read_net('layer { name: "w" type: "GenericWindowData" top: "data" top: "label" '
                           'generic_window_data_param { source: "s" crop_size: 227 batch_size: 5 '
                           'context_pad: 24 random_crop: true is_gray: true max_jitter: 3 } }'
                           ).layer[0].generic_window_data_param
    assert (lp.crop_size, lp.context_pad, lp.random_crop, lp.is_gray, lp.max_jitter,
            lp.crop_mode, lp.scale) == (227, 24, True, True, 3, "warp", 1.0)
    sq = caffe_pb2.SquareBoxDataParameter()
    assert (sq.mn_bxsz_by_imsz, sq.mx_bxsz_by_imsz, sq.mx_dist) == (0.5, 1.0, 10.0)


def test_windows_of_the_crop_size_are_copied_in_file_order(files):
    d, images, labels = files
    shapes, [(data, label)] = _run(_generic(d, "scale: 0.5"))
    assert shapes == [(4, 6, 16, 16), (4, 4, 1, 1)]
    for n in range(4):
        k = n % 3                                   # the fourth item wraps to example 0
        np.testing.assert_array_equal(label[n, :, 0, 0], labels[k])
        first = images[k][3:19, 2:18].transpose(2, 0, 1) * 0.5
        second = images[(k + 1) % 3][20:36, 10:26].transpose(2, 0, 1) * 0.5
        np.testing.assert_array_equal(data[n, :3], first)
        np.testing.assert_array_equal(data[n, 3:], second)


def test_random_crop_draws_from_mt19937_seeded_3(files):
    d, images, _ = files
    _, [(data, _)] = _run(_generic(d, "random_crop: true is_gray: true"))
    assert data.shape == (4, 2, 16, 16)
    # mt19937(3)'s first outputs 2365658986, 303761048 (h, then w): 40 x 50 images, crop 16
    y, x = 2365658986 % 24, 303761048 % 34
    gray = np.asarray(PIL.open(str(d / "im0.png")).convert("L"), dtype=np.float64)
    np.testing.assert_array_equal(data[0, 0], gray[y:y + 16, x:x + 16])
    # both images of an example draw the same numbers (one generator each, both seeded 3)
    gray1 = np.asarray(PIL.open(str(d / "im1.png")).convert("L"), dtype=np.float64)
    np.testing.assert_array_equal(data[0, 1], gray1[y:y + 16, x:x + 16])


def test_context_pad_widens_the_window_and_fills_the_crop(files):
    d, images, _ = files
    _, [(data, _)] = _run(_generic(d, "context_pad: 4"))
    # window (2, 3)-(17, 18), centre (10, 11), scale 16 / (16 - 8) = 2: (-6, -5)-(26, 27),
    # clipped to (0, 0)-(26, 27) and warped to the whole 16 x 16 crop
    ref = resize_bilinear(images[0][0:28, 0:27], 16, 16).transpose(2, 0, 1)
    np.testing.assert_array_equal(data[0, :3], ref)


@pytest.mark.parametrize("extra,message", [("mirror: true", "mirror needs random_crop"),
                                           ("context_pad: 8", "context_pad"),
                                           ("crop_mode: \"box\"", "crop_mode")])
def test_bad_parameters(files, extra, message):
    d, _, _ = files
    with pytest.raises(NetError, match=message):
        _run(_generic(d, extra))


def test_missing_window_file_is_one_line():
    with pytest.raises(CaffeError) as e:
        _run('type: "GenericWindowData" generic_window_data_param { source: "/no/such.txt" '
             'crop_size: 8 batch_size: 1 }')
    assert "cannot open window file /no/such.txt" in str(e.value) and "\n" not in str(e.value)


def test_square_box_data(files):
    d, _, _ = files
    shapes, [(data, label)] = _run(
        'type: "SquareBoxData" square_box_data_param { source: "%s/sq.txt" root_folder: "%s/" '
        'crop_size: 16 batch_size: 4 } transform_param { mirror: true mean_value: 100 }' % (d, d))
    assert shapes == [(4, 3, 16, 16), (4, 1, 1, 1)]
    assert not label.any() and np.abs(data).max() <= 155 and data.any()


NET = """
layer { name: "window_data" type: "GenericWindowData" top: "data" top: "label"
        generic_window_data_param { source: "%s/win.txt" root_folder: "%s/" crop_size: 16
                                    batch_size: 5 context_pad: 2 random_crop: true } }
layer { name: "ipchannel" type: "Slice" bottom: "data" top: "data_1" top: "data_2"
        slice_param { slice_dim: 1 slice_point: 3 } }
layer { name: "silence" type: "Silence" bottom: "data_1" bottom: "data_2" }
"""


def test_generic_window_net_excerpt(files):
    d, _, _ = files
    text = NET % (d, d)
    net = Net(proto_io.read_net(text), caffe_pb2.TRAIN)
    net.forward()
    assert net.blobs["data_1"].shape == net.blobs["data_2"].shape == (5, 3, 16, 16)
    assert net.blobs["label"].shape == (5, 4, 1, 1)
    net.layers[0].close()
    # without its files: the zoo's shapes, two RGB images per example to fill the Slice
    param = zoo.replace_data_layers(proto_io.read_net(NET % ("/absent", "/absent")))
    assert [list(s.dim) for s in param.layer[0].input_param.shape] == [[5, 6, 16, 16],
                                                                       [5, 1, 1, 1]]
    gray = NET.replace("random_crop: true", "is_gray: true").replace("slice_point: 3",
                                                                    "slice_point: 1")
    param = zoo.replace_data_layers(proto_io.read_net(gray % ("/absent", "/absent")))
    assert list(param.layer[0].input_param.shape[0].dim) == [5, 2, 16, 16]
