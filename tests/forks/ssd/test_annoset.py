"""SSD's convert_annoset (forks/ssd/annoset.py): VOC XML / txt box files and a label map into an
LMDB of AnnotatedDatum that the AnnotatedData layer reads back."""
import numpy as np
import pytest

from caffepy.data.image import encode_image
from caffepy.errors import CaffeError
from caffepy.forks.ssd import annoset
from caffepy.proto import caffe_pb2
from caffepy.testing import make_blobs, make_layer

pytest.importorskip("lmdb")

LABELMAP = """item { name: "none_of_the_above" label: 0 display_name: "background" }
item { name: "cat" label: 1 display_name: "cat" }
item { name: "dog" label: 2 display_name: "dog" }
"""

XML = """<annotation><size><width>40</width><height>20</height><depth>3</depth></size>
<object><name>dog</name><difficult>0</difficult>
  <bndbox><xmin>4</xmin><ymin>2</ymin><xmax>20</xmax><ymax>10</ymax></bndbox></object>
<object><name>cat</name><difficult>1</difficult>
  <bndbox><xmin>0</xmin><ymin>0</ymin><xmax>40</xmax><ymax>20</ymax></bndbox></object>
<object><name>dog</name><difficult>0</difficult>
  <bndbox><xmin>10</xmin><ymin>10</ymin><xmax>30</xmax><ymax>20</ymax></bndbox></object>
</annotation>"""


def _tree(tmp_path):
    root = tmp_path / "voc"
    (root / "img").mkdir(parents=True)
    (root / "anno").mkdir()
    img = np.random.default_rng(0).integers(0, 256, (20, 40, 3)).astype(np.uint8)
    (root / "img" / "a.png").write_bytes(encode_image(img, "png"))
    (root / "img" / "b.png").write_bytes(encode_image(img[:, :20], "png"))
    (root / "anno" / "a.xml").write_text(XML)
    (root / "anno" / "b.txt").write_text("3 2 4 12 16\n")
    (tmp_path / "labelmap.prototxt").write_text(LABELMAP)
    return root, img


def _read(path):
    from caffepy.data.db import LMDB, open_db
    with open_db(path, LMDB, "r") as db:
        out = []
        for key, value in db.items():
            a = caffe_pb2.AnnotatedDatum()
            a.ParseFromString(value)
            out.append((bytes(key), a))
    return out


def test_voc_xml_to_annotated_datums_and_back_through_the_layer(tmp_path):
    root, img = _tree(tmp_path)
    (tmp_path / "list.txt").write_text("img/a.png anno/a.xml\nimg/a.png anno/missing.xml\n")
    db = str(tmp_path / "db")
    n = annoset.convert_annoset(str(root) + "/", str(tmp_path / "list.txt"), db,
                                anno_type="detection", label_map_file=str(tmp_path / "labelmap.prototxt"),
                                encoded=True, log=lambda m: None)
    assert n == 2
    (k0, a0), (k1, a1) = _read(db)
    assert k0 == b"00000000_img/a.png" and a0.type == caffe_pb2.AnnotatedDatum.BBOX
    assert a0.datum.encoded and (a0.datum.channels, a0.datum.height, a0.datum.width) == (3, 20, 40)
    assert [g.group_label for g in a0.annotation_group] == [2, 1]
    dogs = a0.annotation_group[0].annotation
    assert [a.instance_id for a in dogs] == [0, 1]
    np.testing.assert_allclose([dogs[0].bbox.xmin, dogs[0].bbox.ymin, dogs[0].bbox.xmax,
                                dogs[0].bbox.ymax], [0.1, 0.1, 0.5, 0.5], rtol=1e-6)
    assert a0.annotation_group[1].annotation[0].bbox.difficult
    assert len(a1.annotation_group) == 0
    layer = make_layer('type: "AnnotatedData" data_param { source: "%s" backend: LMDB batch_size: 2 }'
                       % db, dtype=np.float32, phase=caffe_pb2.TRAIN)
    top = make_blobs(2, dtype=np.float32)
    layer.setup([], top)
    try:
        layer.forward([], top)
    finally:
        layer.close()
    np.testing.assert_array_equal(top[0].data[0], img.transpose(2, 0, 1))
    np.testing.assert_allclose(top[1].data[0, 0, :, :3], [[0, 2, 0], [0, 2, 1], [0, 1, 0]])


def test_txt_boxes_raw_resized_and_refusals(tmp_path):
    root, _ = _tree(tmp_path)
    (tmp_path / "list.txt").write_text("img/b.png anno/b.txt\n")
    db = str(tmp_path / "db")
    annoset.convert_annoset(str(root) + "/", str(tmp_path / "list.txt"), db, anno_type="detection",
                            label_type="txt", resize_height=10, resize_width=10, log=lambda m: None)
    ((_, a),) = _read(db)
    assert not a.datum.encoded and (a.datum.channels, a.datum.height, a.datum.width) == (3, 10, 10)
    b = a.annotation_group[0].annotation[0].bbox
    assert a.annotation_group[0].group_label == 3
    np.testing.assert_allclose([b.xmin, b.ymin, b.xmax, b.ymax], [0.1, 0.2, 0.6, 0.8], rtol=1e-6)
    with pytest.raises(CaffeError, match="json"):
        annoset.convert_annoset(str(root) + "/", str(tmp_path / "list.txt"), str(tmp_path / "x"),
                                anno_type="detection", label_type="json")
    (tmp_path / "bad.txt").write_text("img/a.png anno/a.xml\n")
    (tmp_path / "labelmap.prototxt").write_text('item { name: "cat" label: 1 }')
    with pytest.raises(CaffeError, match="unknown name: dog"):
        annoset.convert_annoset(str(root) + "/", str(tmp_path / "bad.txt"), str(tmp_path / "y"),
                                anno_type="detection", label_map_file=str(tmp_path / "labelmap.prototxt"),
                                log=lambda m: None)


def test_main_classification(tmp_path, capsys):
    root, _ = _tree(tmp_path)
    (tmp_path / "list.txt").write_text("img/a.png 4\nimg/b.png 5\n")
    db = str(tmp_path / "db")
    assert annoset.main([str(root) + "/", str(tmp_path / "list.txt"), db, "--shuffle"]) == 0
    labels = sorted(a.datum.label for _, a in _read(db))
    assert labels == [4, 5] and all(not a.HasField("type") for _, a in _read(db))
    assert annoset.main([str(root) + "/", str(tmp_path / "list.txt"), db]) == 1
    assert "convert_annoset: error:" in capsys.readouterr().err
