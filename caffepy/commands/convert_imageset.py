"""``caffepy convert_imageset [FLAGS] ROOTFOLDER/ LISTFILE DB_NAME``: images → LMDB/LevelDB of Datums.

As Caffe's tools/convert_imageset: LISTFILE lines are ``<path> <label>`` (split at the last space),
the image read is ROOTFOLDER + path, keys are ``%08d_<path>``. Flags: --gray, --shuffle,
--backend lmdb|leveldb, --resize_width, --resize_height, --check_size, --encoded, --encode_type.
"""
from ..data.convert import add_bool_flag, convert_imageset

NAME = "convert_imageset"
HELP = "convert a list of images to an LMDB/LevelDB of Datums (Caffe's convert_imageset)"


def add_arguments(parser):
    parser.add_argument("root_folder", help="prefix of every image path (keep the trailing /)")
    parser.add_argument("list_file", help="lines '<path> <label>'")
    parser.add_argument("db_name", help="database to create")
    add_bool_flag(parser, "gray", "treat images as grayscale ones")
    add_bool_flag(parser, "shuffle", "randomly shuffle the order of images and their labels")
    parser.add_argument("--backend", default="lmdb", choices=("lmdb", "leveldb"),
                        help="the backend for storing the result")
    parser.add_argument("--resize_width", type=int, default=0, help="width images are resized to")
    parser.add_argument("--resize_height", type=int, default=0, help="height images are resized to")
    add_bool_flag(parser, "check_size", "check that all the datum have the same size")
    add_bool_flag(parser, "encoded", "store the encoded image in the datum")
    parser.add_argument("--encode_type", default="",
                        help="what type should we encode the image as ('png','jpg',...)")


def run(args):
    convert_imageset(args.root_folder, args.list_file, args.db_name, gray=args.gray,
                     shuffle=args.shuffle, backend=args.backend, resize_height=args.resize_height,
                     resize_width=args.resize_width, check_size=args.check_size,
                     encoded=args.encoded, encode_type=args.encode_type)
    return 0
