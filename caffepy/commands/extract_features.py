"""``caffepy extract_features WEIGHTS NET_PROTO BLOBS DBS NUM_MINI_BATCHES DB_TYPE [CPU|GPU] [DEVICE_ID]``.

As Caffe's tools/extract_features: the net (TEST phase, weights from WEIGHTS) runs forward
NUM_MINI_BATCHES times; for every blob of the comma-separated BLOBS (e.g. ``fc7,conv5``) each item
of the batch is written to the matching database of DBS (comma-separated, as many as blobs, each
created new; DB_TYPE lmdb or leveldb) as a Datum with channels/height/width the blob's legacy
4-d shape and ``float_data`` its values, under the key ``%010d`` (the item's running index).
"""
from .. import common
from ..data.datum import array_to_datum
from ..data.db import open_db
from ..errors import CaffeError

NAME = "extract_features"
HELP = "write the values of net blobs for N mini-batches to LMDB/LevelDB (Caffe's extract_features)"


def add_arguments(parser):
    parser.add_argument("pretrained_net_param", help=".caffemodel (or .h5) weights")
    parser.add_argument("feature_extraction_proto_file", help="net prototxt (built in TEST phase)")
    parser.add_argument("extract_feature_blob_names", help="blob names, comma-separated")
    parser.add_argument("save_feature_dataset_names", help="databases to create, comma-separated")
    parser.add_argument("num_mini_batches", type=int)
    parser.add_argument("db_type", choices=("lmdb", "leveldb"))
    parser.add_argument("mode", nargs="?", default="CPU", choices=("CPU", "GPU"))
    parser.add_argument("device_id", nargs="?", type=int, default=0)


def extract_features(net, blob_names, db_paths, num_mini_batches, db_type="lmdb", log=print):
    """Run ``net`` forward ``num_mini_batches`` times; returns the items written per database."""
    if len(blob_names) != len(db_paths):
        raise CaffeError("the number of blob names (%d) and dataset names (%d) must be equal"
                         % (len(blob_names), len(db_paths)))
    for name in blob_names:
        if name not in net.blobs:
            raise CaffeError("unknown feature blob name '%s' in the network" % name)
    dbs = [open_db(p, db_type, "w") for p in db_paths]
    counts = [0] * len(dbs)
    try:
        for _ in range(num_mini_batches):
            net.forward()
            for i, (name, db) in enumerate(zip(blob_names, dbs)):
                blob = net.blobs[name]
                shape = (blob.channels, blob.height, blob.width)
                for item in blob.data.reshape((blob.num,) + shape):
                    datum = array_to_datum(item.astype("float32"))
                    db.put("%010d" % counts[i], datum.SerializeToString())
                    counts[i] += 1
                    if counts[i] % 1000 == 0:
                        db.commit()
                        log("Extracted features of %d query images for feature blob %s" % (counts[i], name))
    finally:
        for db in dbs:
            db.close()
    for name, n in zip(blob_names, counts):
        if n % 1000:
            log("Extracted features of %d query images for feature blob %s" % (n, name))
    return counts


def run(args):
    from ..net import Net
    from ..proto import caffe_pb2
    if args.mode == "GPU":
        common.set_mode_gpu()
        common.set_device(args.device_id)
    else:
        common.set_mode_cpu()
    net = Net(args.feature_extraction_proto_file, phase=caffe_pb2.TEST,
              weights=args.pretrained_net_param)
    try:
        extract_features(net, args.extract_feature_blob_names.split(","),
                         args.save_feature_dataset_names.split(","), args.num_mini_batches,
                         args.db_type)
    finally:
        for layer in net.layers:
            if hasattr(layer, "close"):
                layer.close()
    return 0
