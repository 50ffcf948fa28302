import numpy as np
import pytest

from caffepy.testing import check_layer_gradient, make_blobs, make_layer, run_layer


def test_triver_loss_values_and_gradient():
    f = np.array([[0.0, 0.0], [1.0, 0.0],        # anchors
                  [0.0, 1.0], [1.0, 0.5],        # positives
                  [2.0, 0.0], [1.0, 0.2]])       # negatives
    lab = np.array([0, 1, 0, 1, 2, 3.0])
    layer = make_layer('type: "TriVerLoss" triver_loss_param { k: 2 lamda: 1 }')
    (loss,) = run_layer(layer, make_blobs([f, lab]), make_blobs(1))
    # ap = (1, 0.25), an = (4, 0.04); first an > ap: triplet 0 -> M = 2 * 1
    assert float(loss) == pytest.approx((1 + 0 + 0.25 + (2 - 0.04)) / 6 / 2)
    bottom, top = make_blobs([f, lab]), make_blobs(1)
    run_layer(layer, bottom, top)
    top[0].diff[...] = 1
    layer.backward(top, [True, False], bottom)
    a, p, n = f[:2], f[2:4], f[4:]
    want = np.concatenate([[a[0] - p[0], n[1] - p[1]], p - a, [[0, 0], a[1] - n[1]]]) / 6
    np.testing.assert_allclose(bottom[0].diff, want)       # M held fixed, as the fork
    # with every hinge inactive M does not enter: the gradient is the loss's
    rng = np.random.default_rng(22)
    f = rng.standard_normal((6, 3))
    check_layer_gradient(make_layer('type: "TriVerLoss" triver_loss_param { k: 0.001 lamda: 1 }'),
                         make_blobs([f, lab]), make_blobs(1), check_bottom=[0])


def test_txtfeat_data_reads_text_and_binary_features(tmp_path):
    (tmp_path / "a.txt").write_text("1 2 3\n")
    np.array([4, 5, 6], "<f4").tofile(str(tmp_path / "b.bin"))
    (tmp_path / "list.txt").write_text("a.txt 0 0 1 1 3\n")
    (tmp_path / "blist.txt").write_text("b.bin 0 0 1 1 7\nb.bin 0 0 1 1 2\n")
    text = ('type: "TxtFeatData" txtfeat_data_param { source: "%s" root_folder: "%s/" '
            'batch_size: 2 feat_dim: 3 %s }')
    data, label = run_layer(make_layer(text % (tmp_path / "list.txt", tmp_path, "")), [],
                            make_blobs(2))
    assert data.shape == (2, 3, 1, 1)
    np.testing.assert_allclose(data[:, :, 0, 0], [[1, 2, 3], [1, 2, 3]])
    np.testing.assert_allclose(label, [3, 3])
    data, label = run_layer(make_layer(text % (tmp_path / "blist.txt", tmp_path,
                                               "b_binary_file: true")), [], make_blobs(2))
    np.testing.assert_allclose(data[:, :, 0, 0], [[4, 5, 6], [4, 5, 6]])
    np.testing.assert_allclose(label, [7, 2])


def _gray(path, img):
    from caffepy.data.image import encode_image
    path.write_bytes(encode_image(img[:, :, None].astype(np.uint8), "png"))


def test_face_image_crops_around_the_centre(tmp_path):
    img = (np.arange(10)[:, None] * 10 + np.arange(12)[None, :]).astype(np.uint8)   # 10 x 12
    _gray(tmp_path / "f.png", img)
    (tmp_path / "list.txt").write_text("f.png 6 5 3 4 9\n")
    text = ('type: "FaceImage" face_image_param { source: "%s" root_folder: "%s/" batch_size: 1 }'
            ' transform_param { crop_width: 4 crop_height: 4 scale: 0.5 %s }')
    data, label = run_layer(make_layer(text % (tmp_path / "list.txt", tmp_path, "")), [],
                            make_blobs(2))
    assert data.shape == (1, 1, 4, 4) and label.tolist() == [9]
    np.testing.assert_allclose(data[0, 0], img[3:7, 4:8] * 0.5)
    # mirror (always at TEST): the second centre, flipped
    data, _ = run_layer(make_layer(text % (tmp_path / "list.txt", tmp_path, "mirror: true")),
                        [], make_blobs(2))
    np.testing.assert_allclose(data[0, 0], img[2:6, 1:5][:, ::-1] * 0.5)


def test_face_image_reflects_past_the_border_and_triplets(tmp_path):
    img = (np.arange(6)[:, None] * 6 + np.arange(6)[None, :]).astype(np.uint8)
    for name in ("a", "b", "c"):
        _gray(tmp_path / (name + ".png"), img)
    (tmp_path / "list.txt").write_text("a.png 1 1 1 1 0\nb.png 1 1 1 1 0\nc.png 1 1 1 1 5\n")
    text = ('type: "FaceImage" face_image_param { source: "%s" root_folder: "%s/" batch_size: 3 '
            'triplet_ver: true } transform_param { crop_width: 4 crop_height: 4 }'
            % (tmp_path / "list.txt", tmp_path))
    data, label = run_layer(make_layer(text), [], make_blobs(2))
    assert label.tolist() == [0, 0, 5]
    ref = np.pad(img, 1, mode="reflect")[0:4, 0:4]          # rows / cols -1..2 about (1, 1)
    np.testing.assert_allclose(data[0, 0], ref)
