"""SSD's tools/convert_annoset: images and their box files -> an LMDB / LevelDB of AnnotatedDatum,
the input of the AnnotatedData layer.

    python3 -m caffepy.forks.ssd.annoset [FLAGS] ROOTFOLDER/ LISTFILE DB_NAME

LISTFILE holds whitespace-separated pairs: ``<image> <label>`` (``--anno_type classification``,
the default) or ``<image> <box file>`` (``--anno_type detection``), both read under ROOTFOLDER.
Box files (``--label_type``): ``xml`` (PASCAL VOC: ``annotation/size``, and per ``object`` its
``name`` (mapped to a label by ``--label_map_file``, a LabelMap prototxt), ``difficult`` and
``bndbox`` xmin / ymin / xmax / ymax in pixels) or ``txt`` (lines ``label xmin ymin xmax ymax`` in
pixels). Boxes are normalised by the original image size and grouped by label, instance ids
counting within each group, as SSD's ReadXMLToAnnotatedDatum / ReadTxtToAnnotatedDatum; an image
whose box file is missing gets no groups. Keys are ``%08d_<image>``. Flags as SSD's: --gray,
--shuffle, --backend, --resize_width / --resize_height, --min_dim / --max_dim (aspect-keeping
scale), --check_label, --check_size, --encoded, --encode_type. SSD's ``json`` label type is not
implemented (refused).
"""
import argparse
import os
import sys
import xml.etree.ElementTree as ET

from google.protobuf import text_format

from ... import common
from ...data.convert import add_bool_flag
from ...data.datum import encoded_datum, image_to_datum
from ...data.db import open_db
from ...data.image import encode_image, image_ext, read_image, resize_bilinear
from ...errors import CaffeError
from ...proto import caffe_pb2


def _log(msg):
    sys.stderr.write(msg + "\n")


def read_label_map(path, check_label=False):
    """{name: label} of a LabelMap prototxt (``check_label``: a repeated name is an error)."""
    lm = caffe_pb2.LabelMap()
    try:
        with open(path) as f:
            text_format.Parse(f.read(), lm)
    except (OSError, text_format.ParseError) as e:
        raise CaffeError("%s: cannot read the label map: %s" % (path, e))
    out = {}
    for item in lm.item:
        if check_label and item.name in out:
            raise CaffeError("%s: there are many duplicates of name: %s" % (path, item.name))
        out[item.name] = item.label
    return out


def _read(path, height, width, min_dim, max_dim, is_color):
    img = read_image(path, 0, 0, is_color)
    h, w = img.shape[:2]
    if min_dim > 0 or max_dim > 0:
        scale = 1.0
        if min_dim > 0 and min(h, w) < min_dim:
            scale = min_dim / min(h, w)
        if max_dim > 0 and int(scale * max(h, w)) > max_dim:
            scale = max_dim / max(h, w)
        if scale != 1.0:
            img = resize_bilinear(img, int(round(h * scale)), int(round(w * scale)))
    elif height > 0 and width > 0:
        img = resize_bilinear(img, height, width)
    return img, (h, w)


def image_datum(path, label, height=0, width=0, min_dim=0, max_dim=0, is_color=True, encoding=""):
    """(Datum, original (h, w)) as SSD's ReadImageToDatum; None when the image cannot be read."""
    try:
        img, orig = _read(path, height, width, min_dim, max_dim, is_color)
    except CaffeError as e:
        _log("warning: %s (skipped)" % e)
        return None
    if not encoding:
        return image_to_datum(img, label), orig
    ext, enc = image_ext(path), encoding.lower()
    same = ext == enc or (enc == "jpg" and ext == "jpeg")
    if (img.shape[2] == 3) == bool(is_color) and not (height or width or min_dim or max_dim) and same:
        with open(path, "rb") as f:
            d = encoded_datum(f.read(), label)
        d.channels, d.height, d.width = img.shape[2], img.shape[0], img.shape[1]
        return d, orig
    return encoded_datum(encode_image(img, encoding), label), orig


def _add_box(anno, label, box, difficult):
    group = next((g for g in anno.annotation_group if g.group_label == label), None)
    if group is None:
        group = anno.annotation_group.add()
        group.group_label = label
    inst = group.annotation[-1].instance_id + 1 if len(group.annotation) else 0
    a = group.annotation.add()
    a.instance_id = inst
    a.bbox.xmin, a.bbox.ymin, a.bbox.xmax, a.bbox.ymax = box
    a.bbox.difficult = difficult
    return a


def _int(text, path, log):
    try:
        return int(text)
    except (TypeError, ValueError):
        log("warning: %s: box coordinate %r is not an integer; read as 0 (as SSD)" % (path, text))
        return 0


def read_xml_boxes(path, img_hw, name_to_label, anno, log=_log):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        raise CaffeError("%s: cannot parse the annotation: %s" % (path, e))
    try:
        height = int(root.find("size/height").text)
        width = int(root.find("size/width").text)
    except (AttributeError, TypeError, ValueError):
        log("warning: %s: no annotation/size; the image's size is used" % path)
        height, width = img_hw
    if (height, width) != tuple(img_hw):
        log("warning: %s: inconsistent image size" % path)
    if not height or not width:
        raise CaffeError("%s: no valid image width/height" % path)
    for obj in root.findall("object"):
        a, difficult = None, False
        for child in obj:
            if child.tag == "name":
                name = (child.text or "").strip()
                if name not in name_to_label:
                    raise CaffeError("%s: unknown name: %s" % (path, name))
                a = _add_box(anno, name_to_label[name], (0.0, 0.0, 0.0, 0.0), False)
            elif child.tag == "difficult":
                difficult = (child.text or "").strip() == "1"
            elif child.tag == "bndbox":
                if a is None:
                    raise CaffeError("%s: an object's bndbox comes before its name" % path)
                v = [_int(child.findtext(k, "0").strip(), path, log)
                     for k in ("xmin", "ymin", "xmax", "ymax")]
                a.bbox.xmin, a.bbox.ymin = v[0] / width, v[1] / height
                a.bbox.xmax, a.bbox.ymax = v[2] / width, v[3] / height
                a.bbox.difficult = difficult


def read_txt_boxes(path, img_hw, anno):
    height, width = img_hw
    with open(path) as f:
        tokens = f.read().split()
    for i in range(0, len(tokens) - 4, 5):
        try:
            label = int(tokens[i])
            x0, y0, x1, y1 = (float(t) for t in tokens[i + 1:i + 5])
        except ValueError:
            break                                    # SSD's stream read stops there
        _add_box(anno, label, (x0 / width, y0 / height, x1 / width, y1 / height), False)


def convert_annoset(root_folder, list_file, db_path, anno_type="classification", label_type="xml",
                    label_map_file="", check_label=False, gray=False, shuffle=False,
                    backend="lmdb", resize_height=0, resize_width=0, min_dim=0, max_dim=0,
                    check_size=False, encoded=False, encode_type="", log=_log):
    """Write the list's images (and boxes) into a new database; returns the number written."""
    if anno_type not in ("classification", "detection"):
        raise CaffeError("anno_type must be classification or detection, got %r" % anno_type)
    if anno_type == "detection" and label_type not in ("xml", "txt"):
        raise CaffeError("label_type %r is not supported (xml or txt)" % label_type)
    name_to_label = (read_label_map(label_map_file, check_label)
                     if anno_type == "detection" and label_type == "xml" else {})
    with open(list_file) as f:
        tokens = f.read().split()
    lines = []
    for i in range(0, len(tokens) - 1, 2):
        if anno_type == "classification":
            try:
                lines.append((tokens[i], int(tokens[i + 1])))
            except ValueError:
                break
        else:
            lines.append((tokens[i], tokens[i + 1]))
    if shuffle:
        log("Shuffling data")
        lines = [lines[i] for i in common.rng().permutation(len(lines))]
    log("A total of %d images." % len(lines))
    if encode_type and not encoded:
        log("encode_type specified, assuming encoded=true.")
        encoded = True
    count, data_size = 0, None
    with open_db(db_path, backend, "w") as db:
        for line_id, (name, second) in enumerate(lines):
            enc = encode_type or (image_ext(name) if encoded else "")
            got = image_datum(root_folder + name, second if anno_type == "classification" else -1,
                              max(0, resize_height), max(0, resize_width), max(0, min_dim),
                              max(0, max_dim), not gray, enc)
            if got is None:
                log("warning: failed to read %s" % name)
                continue
            anno = caffe_pb2.AnnotatedDatum()
            anno.datum.CopyFrom(got[0])
            if anno_type == "detection":
                box_file = root_folder + second
                if os.path.exists(box_file):
                    if label_type == "xml":
                        read_xml_boxes(box_file, got[1], name_to_label, anno, log)
                    else:
                        read_txt_boxes(box_file, got[1], anno)
                anno.type = caffe_pb2.AnnotatedDatum.BBOX
            if check_size:
                d = anno.datum
                if data_size is None:
                    data_size = d.channels * d.height * d.width
                elif len(d.data) != data_size:
                    raise CaffeError("%s: incorrect data field size %d (expected %d)"
                                     % (name, len(d.data), data_size))
            db.put("%08d_%s" % (line_id, name), anno.SerializeToString())
            count += 1
            if count % 1000 == 0:
                db.commit()
                log("Processed %d files." % count)
    if count % 1000:
        log("Processed %d files." % count)
    return count


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m caffepy.forks.ssd.annoset",
                                description="SSD's convert_annoset: images and box files to an "
                                            "LMDB/LevelDB of AnnotatedDatum")
    p.add_argument("root_folder")
    p.add_argument("list_file")
    p.add_argument("db_name")
    p.add_argument("--anno_type", default="classification", choices=("classification", "detection"))
    p.add_argument("--label_type", default="xml")
    p.add_argument("--label_map_file", default="")
    add_bool_flag(p, "check_label", "check that there is no duplicated name/label")
    add_bool_flag(p, "gray", "treat images as grayscale ones")
    add_bool_flag(p, "shuffle", "randomly shuffle the order of images and their labels")
    p.add_argument("--backend", default="lmdb", choices=("lmdb", "leveldb"))
    p.add_argument("--min_dim", type=int, default=0)
    p.add_argument("--max_dim", type=int, default=0)
    p.add_argument("--resize_width", type=int, default=0)
    p.add_argument("--resize_height", type=int, default=0)
    add_bool_flag(p, "check_size", "check that all the datum have the same size")
    add_bool_flag(p, "encoded", "store the encoded image in the datum")
    p.add_argument("--encode_type", default="")
    a = p.parse_args(argv)
    try:
        convert_annoset(a.root_folder, a.list_file, a.db_name, a.anno_type, a.label_type,
                        a.label_map_file, a.check_label, a.gray, a.shuffle, a.backend,
                        a.resize_height, a.resize_width, a.min_dim, a.max_dim, a.check_size,
                        a.encoded, a.encode_type)
    except (CaffeError, OSError) as e:
        sys.stderr.write("convert_annoset: error: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
