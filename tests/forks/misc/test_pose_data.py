import numpy as np
import pytest

from caffepy.errors import CaffeError
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer
from caffepy.zoo import replace_data_layers


def _write_images(tmp_path):
    pytest.importorskip("PIL")
    from caffepy.data.image import encode_image
    rng = np.random.default_rng(0)
    for name in ("a.png", "b.png"):
        (tmp_path / name).write_bytes(encode_image(rng.integers(0, 255, (5, 6, 3), np.uint8)))
    (tmp_path / "list.txt").write_text("a.png 30 -5\nb.png 120.5 10\n")


def test_pose_data_reads_images_and_their_angles(tmp_path):
    _write_images(tmp_path)
    text = ('type: "PoseData" top: "data" top: "azim" top: "elev" pose_data_param { source: '
            '"%s" root_folder: "%s/" batch_size: 3 new_height: 4 new_width: 4 }'
            % (tmp_path / "list.txt", tmp_path))
    layer = make_layer(text)
    top = make_blobs(3)
    layer.setup([], top)
    layer.forward([], top)
    assert top[0].shape == (3, 3, 4, 4)
    np.testing.assert_array_equal(top[1].data, [30, 120.5, 30])
    np.testing.assert_array_equal(top[2].data, [-5, 10, -5])
    layer.close()


def test_pose_data_names_a_bad_list_line(tmp_path):
    _write_images(tmp_path)
    (tmp_path / "list.txt").write_text("a.png 30 -5\nb.png 120.5\n")
    text = ('type: "PoseData" top: "data" top: "azim" top: "elev" pose_data_param { source: '
            '"%s" root_folder: "%s/" }' % (tmp_path / "list.txt", tmp_path))
    with pytest.raises(CaffeError, match=r"list.txt:2: .*azimuth"):
        make_layer(text).setup([], make_blobs(3))


def test_zoo_gives_pose_data_its_top_shapes():
    net = caffe_pb2.NetParameter()
    lp = net.layer.add(name="d", type="PoseData")
    lp.top.extend(["data", "azim", "elev"])
    lp.pose_data_param.batch_size = 8
    lp.pose_data_param.new_height = lp.pose_data_param.new_width = 64
    lp.transform_param.crop_size = 56
    out = replace_data_layers(net)
    assert [tuple(s.dim) for s in out.layer[0].input_param.shape] == [(8, 3, 56, 56), (8,), (8,)]
