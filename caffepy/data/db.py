"""Key/value databases as Caffe's ``db::DB``: LMDB (the ``lmdb`` package) and LevelDB (``plyvel``).

    db = open_db("examples/mnist/mnist_train_lmdb", "lmdb", "r")
    cur = db.cursor()            # starts at the first key; keys are visited in byte order
    while cur.valid: key, value = cur.key, cur.value; cur.next()
    cur.seek_to_first()          # Caffe's data layers wrap around this way

    with open_db(path, "lmdb", "w") as db:   # new database: fails if it exists, as Caffe
        db.put(b"00000000", datum_bytes)     # buffered; committed every ``commit_every`` puts
                                             # and on close

Backends are named as in ``--backend`` (``lmdb`` / ``leveldb``) or by DataParameter's enum
(``LMDB`` = 1, ``LEVELDB`` = 0). An LMDB is a directory holding ``data.mdb`` and ``lock.mdb``; the
map grows by doubling when full (Caffe's ``LMDBTransaction`` does the same). LevelDB needs plyvel
(``pip install plyvel``); without it the error says so.
"""
import os
import threading

from ..errors import CaffeError

LMDB, LEVELDB = "lmdb", "leveldb"
_ENUM = {0: LEVELDB, 1: LMDB}


def backend_name(backend):
    """Normalise ``"lmdb"`` / ``"LMDB"`` / DataParameter.LMDB (1) / LEVELDB (0) to a name."""
    if isinstance(backend, int):
        if backend not in _ENUM:
            raise CaffeError("unknown db backend %r (LEVELDB=0, LMDB=1)" % backend)
        return _ENUM[backend]
    name = str(backend).lower()
    if name not in (LMDB, LEVELDB):
        raise CaffeError("unknown db backend '%s' (use lmdb or leveldb)" % backend)
    return name


def detect_backend(path):
    """``lmdb`` if ``path`` is an LMDB directory, ``leveldb`` if it looks like one, else None."""
    if os.path.isfile(os.path.join(path, "data.mdb")):
        return LMDB
    if os.path.isfile(os.path.join(path, "CURRENT")):
        return LEVELDB
    return None


def open_db(path, backend=LMDB, mode="r", commit_every=1000):
    """Open a database for reading (``"r"``) or create a new one for writing (``"w"``)."""
    path = os.fspath(path)
    name = backend_name(backend)
    if mode not in ("r", "w"):
        raise CaffeError("%s: db mode must be 'r' or 'w', got %r" % (path, mode))
    if mode == "r" and not os.path.isdir(path):
        raise CaffeError("%s: no such %s database (a directory)" % (path, name))
    if mode == "r" and detect_backend(path) not in (name, None):
        raise CaffeError("%s: is a %s database, but backend %s was asked for (set data_param "
                         "{ backend: %s } or --backend=%s)" % (path, detect_backend(path), name,
                                                              detect_backend(path).upper(),
                                                              detect_backend(path)))
    if mode == "w" and os.path.exists(path):
        raise CaffeError("%s: already exists; Caffe's tools never overwrite a database "
                         "(remove it first)" % path)
    cls = LMDBDatabase if name == LMDB else LevelDBDatabase
    return cls(path, mode, commit_every)


class _Database(object):
    def __init__(self, path, mode, commit_every):
        self.path = path
        self.mode = mode
        self.commit_every = max(1, int(commit_every))
        self._pending = []

    def put(self, key, value):
        if self.mode != "w":
            raise CaffeError("%s: opened read-only" % self.path)
        self._pending.append((_b(key), bytes(value)))
        if len(self._pending) >= self.commit_every:
            self.commit()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __len__(self):
        return sum(1 for _ in self.items())

    def items(self):
        """Every (key, value) pair in key order (bytes)."""
        cur = self.cursor()
        while cur.valid:
            yield cur.key, cur.value
            cur.next()


def _b(key):
    return key.encode("utf-8") if isinstance(key, str) else bytes(key)


_SHARED_ENVS = {}          # realpath -> [read-only lmdb.Environment, users]
_SHARED_LOCK = threading.Lock()


class LMDBDatabase(_Database):
    """An LMDB environment (one unnamed database), as Caffe's ``db_lmdb``.

    LMDB allows one environment per file per process, so readers of the same path (a train and a
    test net on one database, a net rebuilt before the old one is collected) share one read-only
    environment, closed when its last user closes; each cursor has its own read transaction.
    """

    def __init__(self, path, mode, commit_every):
        try:
            import lmdb
        except ImportError:
            raise CaffeError("%s: reading LMDB needs the lmdb package (pip install lmdb, or "
                             "pip install caffepy[data])" % path)
        super(LMDBDatabase, self).__init__(path, mode, commit_every)
        self._lmdb = lmdb
        self._key = os.path.realpath(path)
        self._cursors = []
        try:
            if mode == "r":
                with _SHARED_LOCK:
                    entry = _SHARED_ENVS.get(self._key)
                    if entry is None:
                        entry = _SHARED_ENVS[self._key] = [
                            lmdb.open(path, readonly=True, lock=False, readahead=False,
                                      max_readers=126, subdir=True), 0]
                    entry[1] += 1
                    self.env = entry[0]
            else:
                os.makedirs(path, mode=0o744)
                self.env = lmdb.open(path, map_size=1 << 30, subdir=True)
        except lmdb.Error as e:
            raise CaffeError("%s: cannot open LMDB: %s" % (path, e))

    def commit(self):
        if not self._pending:
            return
        while True:
            try:
                with self.env.begin(write=True) as txn:
                    for k, v in self._pending:
                        txn.put(k, v)
                break
            except self._lmdb.MapFullError:
                self.env.set_mapsize(self.env.info()["map_size"] * 2)
        self._pending = []

    def cursor(self):
        cur = _LMDBCursor(self.env)
        self._cursors.append(cur)
        return cur

    def get(self, key):
        with self.env.begin() as txn:
            return txn.get(_b(key))

    def __len__(self):
        return self.env.stat()["entries"]

    def close(self):
        if getattr(self, "env", None) is None:
            return
        for cur in self._cursors:
            cur.close()
        self._cursors = []
        if self.mode == "w":
            self.commit()
            self.env.close()
        else:
            with _SHARED_LOCK:
                entry = _SHARED_ENVS[self._key]
                entry[1] -= 1
                if entry[1] == 0:
                    del _SHARED_ENVS[self._key]
                    entry[0].close()
        self.env = None


class _LMDBCursor(object):
    def __init__(self, env):
        self._txn = env.begin(buffers=False)
        self._cur = self._txn.cursor()
        self.valid = self._cur.first()

    def seek_to_first(self):
        self.valid = self._cur.first()

    def seek(self, key):
        """Position at ``key`` (valid only when the database holds it)."""
        self.valid = self._cur.set_key(bytes(key))

    def next(self):
        self.valid = self._cur.next()

    @property
    def key(self):
        return self._cur.key()

    @property
    def value(self):
        return self._cur.value()

    def close(self):
        if self._txn is not None:
            self._txn.abort()
            self._txn = self._cur = None
            self.valid = False


def _plyvel():
    try:
        import plyvel
    except ImportError:
        raise CaffeError("LevelDB needs the plyvel package: pip install plyvel (or convert the "
                         "database to LMDB with --backend=lmdb)")
    return plyvel


class LevelDBDatabase(_Database):
    """A LevelDB database through plyvel, as Caffe's ``db_leveldb``."""

    def __init__(self, path, mode, commit_every):
        plyvel = _plyvel()
        super(LevelDBDatabase, self).__init__(path, mode, commit_every)
        try:
            if mode == "r":
                self.db = plyvel.DB(path, create_if_missing=False)
            else:
                self.db = plyvel.DB(path, create_if_missing=True, error_if_exists=True,
                                    write_buffer_size=268435456)
        except plyvel.Error as e:
            raise CaffeError("%s: cannot open LevelDB: %s" % (path, " ".join(str(e).split())))

    def commit(self):
        if not self._pending:
            return
        with self.db.write_batch() as wb:
            for k, v in self._pending:
                wb.put(k, v)
        self._pending = []

    def cursor(self):
        return _LevelDBCursor(self.db)

    def get(self, key):
        return self.db.get(_b(key))

    def close(self):
        if getattr(self, "db", None) is None:
            return
        if self.mode == "w":
            self.commit()
        self.db.close()
        self.db = None


class _LevelDBCursor(object):
    def __init__(self, db):
        self._db = db
        self._snap = db.snapshot()
        self.seek_to_first()

    def seek_to_first(self):
        self._it = self._snap.iterator()
        self.next()

    def seek(self, key):
        """Position at ``key`` (valid only when the database holds it)."""
        key = bytes(key)
        self._it = self._snap.iterator(start=key)
        self.next()
        self.valid = self.valid and self._kv[0] == key

    def next(self):
        try:
            self._kv = next(self._it)
            self.valid = True
        except StopIteration:
            self._kv = (None, None)
            self.valid = False

    @property
    def key(self):
        return self._kv[0]

    @property
    def value(self):
        return self._kv[1]

    def close(self):
        self._it = None
