import numpy as np
import pytest
from PIL import Image

from caffepy.errors import CaffeError
from caffepy.testing import make_blobs, make_layer, run_layer


def _write(tmp_path, sizes):
    rng = np.random.default_rng(0)
    lines, pairs = [], []
    for i, ((h, w), (gh, gw)) in enumerate(sizes):
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        gt = rng.choice(np.array([0, 51, 102, 153, 255], np.uint8), (gh, gw))
        Image.fromarray(img).save(tmp_path / ("i%d.png" % i))
        Image.fromarray(gt).save(tmp_path / ("g%d.png" % i))
        lines.append("i%d.png g%d.png" % (i, i))
        pairs.append((img[:, :, ::-1], gt))       # BGR, as read
    (tmp_path / "list.txt").write_text("\n".join(lines) + "\n")
    return pairs


def _layer(tmp_path, extra="", transform=""):
    return make_layer('type: "ImageLabelmapData" image_data_param { source: "%s/list.txt" '
                      'root_folder: "%s/" %s } transform_param { %s }'
                      % (tmp_path, tmp_path, extra or "batch_size: 2", transform), dtype=np.float32)


def test_image_and_edge_map(tmp_path):
    pairs = _write(tmp_path, [((5, 6), (5, 6)), ((5, 6), (5, 6))])
    data, label = run_layer(_layer(tmp_path, transform="mean_value: 10 scale: 0.5"), [],
                            make_blobs(2, np.float32))
    assert data.shape == (2, 3, 5, 6) and label.shape == (2, 1, 5, 6)
    for n, (img, gt) in enumerate(pairs):
        np.testing.assert_allclose(data[n], (img.transpose(2, 0, 1) - 10.0) * 0.5)
        want = gt / np.float32(255)
        want[want > 0.5] = 1
        np.testing.assert_allclose(label[n, 0], want, rtol=1e-6)
    assert set(np.unique(label)) <= {0, np.float32(0.2), np.float32(0.4), 1}


def test_crop_and_errors(tmp_path):
    _write(tmp_path, [((7, 8), (7, 8)), ((9, 6), (9, 6))])
    data, label = run_layer(_layer(tmp_path, transform="crop_size: 4 mirror: true"), [],
                            make_blobs(2, np.float32))
    assert data.shape == (2, 3, 4, 4) and label.shape == (2, 1, 4, 4)
    with pytest.raises(CaffeError, match="the batch 7x8"):
        run_layer(_layer(tmp_path), [], make_blobs(2, np.float32))
    _write(tmp_path, [((5, 6), (5, 7))])
    with pytest.raises(CaffeError, match="edge map g0.png is 5x7"):
        run_layer(_layer(tmp_path, "batch_size: 1"), [], make_blobs(2, np.float32))
