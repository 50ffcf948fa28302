"""``caffepy prepare_mnist``: MNIST IDX files → ``mnist_train_lmdb`` / ``mnist_test_lmdb``.

Caffe's data/mnist/get_mnist.sh + examples/mnist/create_mnist.sh in one step. The four IDX files
(gzip or not) come from ``--mnist_dir``, else ``$MNIST_DIR``, else ``../shared/datasets/mnist``
(next to the repository or the working directory) when present; otherwise they are downloaded
from the canonical mirrors into ``--download_dir`` and checked against the published MD5 sums
(local .gz files are checked too). The databases are written to ``--output_dir`` (default
``data/mnist``, where models/lenet expects them) through a temporary directory renamed into
place, so an interrupted run never leaves a half database; complete existing ones are kept unless
``--force``.
"""
import hashlib
import os
import shutil
import sys
import urllib.request

from ..data.convert import add_bool_flag, convert_mnist
from ..data.db import detect_backend, open_db
from ..errors import CaffeError

NAME = "prepare_mnist"
HELP = "fetch MNIST (or use a local copy) and write mnist_train_lmdb / mnist_test_lmdb"

FILES = {  # name -> (published MD5 of the .gz, item count)
    "train-images-idx3-ubyte": ("f68b3c2dcbeaaa9fbdd348bbdeb94873", 60000),
    "train-labels-idx1-ubyte": ("d53e105ee54ea40749a09fcbcd1e9432", 60000),
    "t10k-images-idx3-ubyte": ("9fb629c4189551a2d022fa330f9573f3", 10000),
    "t10k-labels-idx1-ubyte": ("ec29112dd5afa0611ce80d1b7f02629c", 10000),
}
MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)
SPLITS = (("train", "train-images-idx3-ubyte", "train-labels-idx1-ubyte", 60000),
          ("test", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", 10000))


def add_arguments(parser):
    parser.add_argument("--mnist_dir", default=None,
                        help="folder with the four MNIST IDX files (default: $MNIST_DIR, then "
                             "../shared/datasets/mnist, then download)")
    parser.add_argument("--output_dir", default=os.path.join("data", "mnist"),
                        help="where mnist_train_lmdb / mnist_test_lmdb are written")
    parser.add_argument("--download_dir", default=None,
                        help="where downloaded files go (default: <output_dir>/raw)")
    parser.add_argument("--backend", default="lmdb", choices=("lmdb", "leveldb"))
    add_bool_flag(parser, "force", "rebuild the databases even if they exist")


def _log(msg):
    sys.stderr.write(msg + "\n")


def md5sum(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def default_mnist_dir():
    env = os.environ.get("MNIST_DIR")
    if env:
        return env
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for base in (repo, os.getcwd()):
        d = os.path.join(base, "..", "shared", "datasets", "mnist")
        if os.path.isdir(d):
            return os.path.normpath(d)
    return None


def find_local(mnist_dir, name):
    """The path of ``name`` (.gz preferred, then plain) in ``mnist_dir``, MD5-checked; or None."""
    gz = os.path.join(mnist_dir, name + ".gz")
    if os.path.isfile(gz):
        got = md5sum(gz)
        if got != FILES[name][0]:
            raise CaffeError("%s: MD5 %s does not match the published %s (corrupt copy?)"
                             % (gz, got, FILES[name][0]))
        return gz
    plain = os.path.join(mnist_dir, name)
    return plain if os.path.isfile(plain) else None


def download(name, dest_dir, mirrors=MIRRORS, timeout=60):
    """Fetch ``name``.gz from the first mirror that serves it with the right MD5."""
    os.makedirs(dest_dir, exist_ok=True)
    dest = os.path.join(dest_dir, name + ".gz")
    if os.path.isfile(dest) and md5sum(dest) == FILES[name][0]:
        return dest
    errors = []
    for base in mirrors:
        tmp = dest + ".part"
        try:
            _log("Downloading %s%s.gz" % (base, name))
            with urllib.request.urlopen(base + name + ".gz", timeout=timeout) as r, open(tmp, "wb") as f:
                shutil.copyfileobj(r, f)
            got = md5sum(tmp)
            if got != FILES[name][0]:
                errors.append("%s: MD5 %s" % (base, got))
                continue
            os.replace(tmp, dest)
            return dest
        except OSError as e:
            errors.append("%s: %s" % (base, getattr(e, "reason", e)))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    raise CaffeError("cannot download %s.gz (%s); put the MNIST files in a folder and pass "
                     "--mnist_dir or set MNIST_DIR" % (name, "; ".join(str(e) for e in errors)))


def _complete(path, backend, expected):
    if not os.path.isdir(path) or detect_backend(path) != backend:
        return False
    try:
        with open_db(path, backend, "r") as db:
            return len(db) == expected
    except CaffeError:
        return False


def prepare(mnist_dir, output_dir, backend="lmdb", force=False, download_dir=None, log=_log,
            mirrors=MIRRORS):
    """Write ``<output_dir>/mnist_{train,test}_<backend>``; returns their paths."""
    paths = {}
    for name in FILES:
        local = find_local(mnist_dir, name) if mnist_dir else None
        if local is None:
            if mnist_dir:
                log("%s not found in %s; downloading" % (name, mnist_dir))
            local = download(name, download_dir or os.path.join(output_dir, "raw"), mirrors)
        paths[name] = local
    out = []
    for split, images, labels, count in SPLITS:
        db_path = os.path.join(output_dir, "mnist_%s_%s" % (split, backend))
        out.append(db_path)
        if not force and _complete(db_path, backend, count):
            log("%s exists with %d items; kept (--force rebuilds it)" % (db_path, count))
            continue
        tmp = "%s.tmp-%d" % (db_path, os.getpid())
        shutil.rmtree(tmp, ignore_errors=True)
        log("Creating %s" % db_path)
        convert_mnist(paths[images], paths[labels], tmp, backend, log=log)
        if os.path.exists(db_path):
            shutil.rmtree(db_path)
        os.replace(tmp, db_path)
    return out


def run(args):
    mnist_dir = args.mnist_dir or default_mnist_dir()
    if mnist_dir and not os.path.isdir(mnist_dir):
        raise CaffeError("--mnist_dir %s: no such folder" % mnist_dir)
    for p in prepare(mnist_dir, args.output_dir, args.backend, args.force, args.download_dir):
        print(p)
    return 0
