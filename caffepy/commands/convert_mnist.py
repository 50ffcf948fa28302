"""``caffepy convert_mnist [--backend lmdb] IMAGES LABELS DB``: MNIST IDX files → LMDB/LevelDB.

As Caffe's examples/mnist/convert_mnist_data: keys ``%08d``, Datums 1 x rows x cols uint8 with the
label. IDX files may be gzip-compressed.
"""
from ..data.convert import convert_mnist

NAME = "convert_mnist"
HELP = "convert MNIST IDX images + labels to an LMDB/LevelDB (Caffe's convert_mnist_data)"


def add_arguments(parser):
    parser.add_argument("image_file")
    parser.add_argument("label_file")
    parser.add_argument("db_path")
    parser.add_argument("--backend", default="lmdb", choices=("lmdb", "leveldb"),
                        help="the backend for storing the result")


def run(args):
    convert_mnist(args.image_file, args.label_file, args.db_path, args.backend)
    return 0
