"""The forks' Data / ImageData fields (forks/misc/fork_data.py): bogger/caffe-multigpu's
label_size, PMLS-Caffe's shared_file_system, xavigibert/caffe's source_map / LMDB_FILE and
mirror_v, DeBlurNet's label: false, rapid_categorization's raw_hdf5."""
import struct

import numpy as np
import pytest

import caffepy
from caffepy import common
from caffepy.data.datum import array_to_datum
from caffepy.data.db import open_db
from caffepy.data.image import encode_image
from caffepy.data.transformer import DataTransformer
from caffepy.errors import CaffeError
from caffepy.forks.misc.fork_data import ForkDataLayer, ForkImageDataLayer, datum_labels
from caffepy.layers.data import DataLayer
from caffepy.layers.data_image import ImageDataLayer
from caffepy.proto import caffe_pb2
from caffepy.proto.io import parse_text, read_net
from caffepy.testing import make_blobs, make_layer
from caffepy.zoo.summary import summarize

RNG = np.random.default_rng(3)

# the form of bogger/caffe-multigpu's multi-label nets: a V1 reader with label_size, its label
# sliced into one class label per attribute
MULTI_LABEL_NET = """name: "attr"
layers { top: "data" top: "label" name: "data" type: IMAGE_DATA label_size: 3
  image_data_param { source: "list_absent.txt" batch_size: 10 }
  transform_param { crop_size: 32 } }
layers { name: "slicer_label" type: SLICE bottom: "label" top: "l1" top: "l2" top: "l3"
  slice_param { slice_dim: 1 slice_point: 1 slice_point: 2 } }
layers { name: "conv" type: CONVOLUTION bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 } }
layers { name: "ip" type: INNER_PRODUCT bottom: "conv" top: "ip" inner_product_param { num_output: 5 } }
layers { name: "loss" type: SOFTMAX_LOSS bottom: "ip" bottom: "l2" top: "loss" }
"""


def fork_datum(arr, labels):
    """A Datum as bogger/caffe-multigpu writes it: ``repeated float label = 5``."""
    raw = array_to_datum(arr).SerializeToString()
    return raw + b"".join(b"\x2d" + struct.pack("<f", v) for v in labels)


def write_db(path, values):
    with open_db(str(path), "lmdb", "w") as db:
        for i, v in enumerate(values):
            db.put("%08d" % i, v if isinstance(v, bytes) else v.SerializeToString())
    return str(path)


def write_images(tmp_path, n, size=(4, 5)):
    names = []
    for i in range(n):
        img = np.full(size + (3,), i * 10, np.uint8)
        name = "im%d.png" % i
        (tmp_path / name).write_bytes(encode_image(img, "png"))
        names.append(name)
    return names


def setup(text, ntop=2, phase=caffe_pb2.TRAIN):
    layer = make_layer(text, dtype=np.float32, phase=phase)
    top = make_blobs(ntop, np.float32)
    layer.setup([], top)
    return layer, top


def test_fields_parse_and_v1_label_size_survives_the_upgrade():
    net = read_net(MULTI_LABEL_NET)
    assert net.layer[0].type == "ImageData" and net.layer[0].label_size == 3
    lp = caffe_pb2.LayerParameter()
    parse_text('type: "Data" data_param { source: "a" shared_file_system: true source_map: "f0" '
               'source_map: "f1" backend: LMDB_FILE } transform_param { mirror_v: true }', lp)
    assert lp.data_param.shared_file_system and list(lp.data_param.source_map) == ["f0", "f1"]
    assert lp.data_param.backend == caffe_pb2.DataParameter.LMDB_FILE and lp.transform_param.mirror_v
    lp = parse_text('type: "ImageData" image_data_param { shared_file_system: true label: false '
                    'raw_hdf5: false }', caffe_pb2.LayerParameter())
    assert not lp.image_data_param.label and lp.image_data_param.HasField("raw_hdf5")
    assert isinstance(make_layer('type: "Data" data_param { source: "a" }'), DataLayer)
    assert not isinstance(make_layer('type: "Data" data_param { source: "a" }'), ForkDataLayer)
    assert isinstance(make_layer('type: "Data" label_size: 2'), ForkDataLayer)
    assert isinstance(make_layer('type: "ImageData" image_data_param { label: false }'),
                      ForkImageDataLayer)
    assert type(make_layer('type: "ImageData"')) is ImageDataLayer


def test_datum_labels_reads_the_forks_floats_and_bvlcs_int():
    raw = fork_datum(np.zeros((1, 1, 1), np.uint8), [1.5, -1.0, 2.0])
    assert datum_labels(raw) == [1.5, -1.0, 2.0]
    packed = struct.pack("<3f", 0.5, 1.0, 3.0)
    assert datum_labels(b"\x2a" + bytes([len(packed)]) + packed) == [0.5, 1.0, 3.0]
    assert datum_labels(array_to_datum(np.zeros((1, 1, 1), np.uint8), 7).SerializeToString()) == [7]
    d = caffe_pb2.Datum(label=-2)
    assert datum_labels(d.SerializeToString()) == [-2]


def test_data_label_size_gives_n_k_1_1_labels(tmp_path):
    items = RNG.integers(0, 256, (5, 1, 2, 2), dtype=np.uint8)
    labels = [[i, 10 + i, -1] for i in range(5)]
    path = write_db(tmp_path / "db", [fork_datum(a, l) for a, l in zip(items, labels)])
    layer, top = setup('type: "Data" label_size: 3 data_param { source: "%s" batch_size: 3 '
                       'backend: LMDB }' % path)
    assert top[0].shape == (3, 1, 2, 2) and top[1].shape == (3, 3, 1, 1)
    layer.forward([], top)
    np.testing.assert_array_equal(top[1].data.reshape(3, 3), labels[:3])
    np.testing.assert_array_equal(top[0].data, items[:3])
    layer.forward([], top)
    np.testing.assert_array_equal(top[1].data.reshape(3, 3), labels[3:] + labels[:1])
    layer.close()
    with pytest.raises(CaffeError, match="3 labels, label_size is 4"):
        setup('type: "Data" label_size: 4 data_param { source: "%s" batch_size: 2 backend: LMDB }'
              % path)


def test_image_data_label_size_reads_k_labels_per_line(tmp_path):
    names = write_images(tmp_path, 3)
    (tmp_path / "list.txt").write_text("".join("%s %d %g\n" % (n, i, i / 2.0)
                                               for i, n in enumerate(names)))
    layer, top = setup('type: "ImageData" label_size: 2 image_data_param { source: "%s" '
                       'root_folder: "%s/" batch_size: 3 }' % (tmp_path / "list.txt", tmp_path))
    assert top[0].shape == (3, 3, 4, 5) and top[1].shape == (3, 2, 1, 1)
    layer.forward([], top)
    np.testing.assert_array_equal(top[1].data.reshape(3, 2), [[0, 0], [1, 0.5], [2, 1]])
    np.testing.assert_array_equal(top[0].data[:, 0, 0, 0], [0, 10, 20])
    layer.close()
    (tmp_path / "bad.txt").write_text("%s 1\n%s 2 3\n" % (names[0], names[1]))
    with pytest.raises(CaffeError, match="not lines of a path and 2 labels"):
        setup('type: "ImageData" label_size: 2 image_data_param { source: "%s" batch_size: 1 }'
              % (tmp_path / "bad.txt"))


@pytest.fixture
def two_workers_rank_1():
    old = common._state.solver_count, common._state.solver_rank
    common._state.solver_count, common._state.solver_rank = 2, 1
    yield
    common._state.solver_count, common._state.solver_rank = old


def test_shared_file_system_image_list_lines_go_to_workers_in_turn(tmp_path, two_workers_rank_1):
    names = write_images(tmp_path, 5)
    (tmp_path / "list.txt").write_text("".join("%s %d\n" % (n, i) for i, n in enumerate(names)))
    for phase in (caffe_pb2.TRAIN, caffe_pb2.TEST):       # PMLS strides in every phase
        layer, top = setup('type: "ImageData" image_data_param { source: "%s" root_folder: "%s/" '
                           'batch_size: 4 shared_file_system: true }'
                           % (tmp_path / "list.txt", tmp_path), phase=phase)
        layer.forward([], top)
        assert list(top[1].data) == [1, 3, 1, 3]
        layer.close()


def test_unshared_file_system_reads_client_0s_copy(tmp_path):
    names = write_images(tmp_path, 2)
    (tmp_path / "list.txt_0").write_text("%s 5\n" % names[1])
    layer, top = setup('type: "ImageData" image_data_param { source: "%s" root_folder: "%s/" '
                       'batch_size: 2 shared_file_system: false }' % (tmp_path / "list.txt", tmp_path))
    layer.forward([], top)
    assert list(top[1].data) == [5, 5]
    layer.close()
    write_db(tmp_path / "db_0", [array_to_datum(np.full((1, 1, 1), 9, np.uint8), 4)])
    layer, top = setup('type: "Data" data_param { source: "%s" batch_size: 1 backend: LMDB '
                       'shared_file_system: false }' % (tmp_path / "db"))
    layer.forward([], top)
    assert top[0].data.ravel().tolist() == [9] and top[1].data.tolist() == [4]
    layer.close()


def test_shared_file_system_data_strides_the_database(tmp_path, two_workers_rank_1):
    path = write_db(tmp_path / "db", [array_to_datum(np.full((1, 1, 1), i, np.uint8), i)
                                      for i in range(5)])
    layer, top = setup('type: "Data" data_param { source: "%s" batch_size: 3 backend: LMDB '
                       'shared_file_system: true }' % path, phase=caffe_pb2.TEST)
    layer.forward([], top)
    assert list(top[1].data) == [1, 3, 0]      # items 1, 3, then 5 -> wraps: 0 is item 5 % 5
    layer.close()


def test_lmdb_file_reads_pixels_from_the_source_map(tmp_path):
    blobs = [bytes(range(10, 22)), bytes(range(100, 124))]
    for i, b in enumerate(blobs):
        (tmp_path / ("split%d" % i)).write_bytes(b"\0" * 3 + b)
    datums = []
    for idx, off, label in ((1, 3 + 12, 0), (0, 3, 1), (1, 3, 2)):
        d = caffe_pb2.Datum(channels=3, height=2, width=2, label=label)
        d.file_idx, d.src_offset = idx, off
        datums.append(d)
    path = write_db(tmp_path / "db", datums)
    maps = " ".join('source_map: "%s"' % (tmp_path / ("split%d" % i)) for i in range(2))
    layer, top = setup('type: "Data" data_param { source: "%s" %s backend: LMDB_FILE '
                       'batch_size: 3 }' % (path, maps))
    layer.forward([], top)
    expect = [blobs[1][12:24], blobs[0][:12], blobs[1][:12]]
    np.testing.assert_array_equal(top[0].data.reshape(3, -1), [list(e) for e in expect])
    layer.close()
    with pytest.raises(CaffeError, match="needs source_map"):
        setup('type: "Data" data_param { source: "%s" backend: LMDB_FILE batch_size: 1 }' % path)
    with pytest.raises(CaffeError, match="needs backend LMDB_FILE"):
        setup('type: "Data" data_param { source: "%s" source_map: "x" batch_size: 1 '
              'backend: LMDB }' % path)


def test_label_false_gives_the_image_top_only(tmp_path):
    names = write_images(tmp_path, 2)
    (tmp_path / "list.txt").write_text("%s\n%s 0\n" % tuple(names))
    text = ('type: "ImageData" image_data_param { source: "%s" root_folder: "%s/" batch_size: 2 '
            'label: false }' % (tmp_path / "list.txt", tmp_path))
    layer, top = setup(text, ntop=1)
    layer.forward([], top)
    np.testing.assert_array_equal(top[0].data[:, 0, 0, 0], [0, 10])
    layer.close()
    with pytest.raises(CaffeError, match="label: false takes 1 top"):
        setup(text, ntop=2)
    with pytest.raises(CaffeError, match="raw_hdf5: true is not supported"):
        setup('type: "ImageData" image_data_param { source: "x" batch_size: 1 raw_hdf5: true }')


def test_mirror_v_flips_rows_of_the_crop():
    p = caffe_pb2.TransformationParameter(crop_size=2, mirror_v=True)
    t = DataTransformer(p, caffe_pb2.TEST, np.float64, seed=1)
    x = np.arange(2 * 9, dtype=np.float64).reshape(2, 1, 3, 3)
    out = t.transform(np.repeat(x[:1], 8, axis=0))
    crop = x[0, :, :2, :2]
    flipped = [np.array_equal(o, crop[:, ::-1]) for o in out]
    assert any(flipped) and not all(flipped)
    assert all(f or np.array_equal(o, crop) for f, o in zip(flipped, out))
    with pytest.raises(CaffeError, match="mirror_v .* needs crop_size"):
        DataTransformer(caffe_pb2.TransformationParameter(mirror_v=True))


def test_summary_gives_a_label_size_reader_n_k_1_1_labels(tmp_path):
    path = tmp_path / "train_val.prototxt"
    path.write_text(MULTI_LABEL_NET)
    rows, _ = summarize(str(path), phase=caffepy.TRAIN, strict=True)
    shapes = {r.name: r.top_shapes for r in rows}
    assert shapes["data"] == [(10, 3, 32, 32), (10, 3, 1, 1)]
    assert shapes["slicer_label"] == [(10, 1, 1, 1)] * 3
    assert shapes["loss"] == [()]


def test_label_size_image_list_is_shuffled_once(tmp_path):
    names = write_images(tmp_path, 6)
    (tmp_path / "list.txt").write_text("".join("%s %d 0\n" % (n, i) for i, n in enumerate(names)))
    layer, top = setup('type: "ImageData" label_size: 2 image_data_param { source: "%s" '
                       'root_folder: "%s/" batch_size: 6 shuffle: true }'
                       % (tmp_path / "list.txt", tmp_path))
    passes = []
    for _ in range(3):
        layer.forward([], top)
        passes.append(list(top[1].data[:, 0, 0, 0]))
    assert sorted(passes[0]) == list(range(6)) and passes[0] == passes[1] == passes[2]
    layer.close()
