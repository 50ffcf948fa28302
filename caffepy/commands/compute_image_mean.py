"""``caffepy compute_image_mean [--backend lmdb] INPUT_DB [OUTPUT_FILE]``: the mean image.

As Caffe's tools/compute_image_mean: averages every Datum of the database (encoded ones decoded),
prints the mean value of each channel and, given OUTPUT_FILE, writes the mean as a BlobProto
(1 x C x H x W, legacy num/channels/height/width fields) for transform_param.mean_file.
"""
from ..data.convert import compute_image_mean
from ..data.datum import write_mean

NAME = "compute_image_mean"
HELP = "compute the mean image of a Datum database (Caffe's compute_image_mean)"


def add_arguments(parser):
    parser.add_argument("input_db")
    parser.add_argument("output_file", nargs="?", help=".binaryproto to write")
    parser.add_argument("--backend", default="lmdb", choices=("lmdb", "leveldb"),
                        help="the backend {leveldb, lmdb} containing the images")


def run(args):
    mean = compute_image_mean(args.input_db, args.backend)
    if args.output_file:
        print("Write to %s" % args.output_file)
        write_mean(mean, args.output_file)
    print("Number of channels: %d" % mean.shape[0])
    for c in range(mean.shape[0]):
        print("mean_value channel [%d]: %g" % (c, float(mean[c].mean(dtype="float64"))))
    return 0
