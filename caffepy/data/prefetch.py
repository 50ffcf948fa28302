"""A background thread that prepares batches ahead of compute (Caffe's BasePrefetchingDataLayer).

``count`` batch buffers (DataParameter.prefetch, 4 by default as Caffe's PREFETCH_COUNT) cycle
between two queues: the thread takes a free buffer, fills it with ``load_batch(buffer)`` and hands
it to the full queue; ``next()`` returns a full buffer to the consumer, who gives it back with
``recycle(buffer)`` once copied. Reading therefore overlaps compute and a forward pass only waits
when the reader is slower than the net.

The thread is a daemon and never holds a reference to the layer (only to ``load_batch``'s owner, a
separate loader object), so a layer that is dropped is collected and its thread stopped
(``weakref.finalize``); ``close()`` stops it at once, then calls ``on_close`` (e.g. closing the
database the loader reads, never while the thread may still use it), and is idempotent. An exception in
``load_batch`` is re-raised by the next ``next()`` in the consumer thread.
"""
import queue
import threading

from ..errors import CaffeError

_POLL = 0.05


class _Failure(object):
    def __init__(self, exc):
        self.exc = exc


def _run(load_batch, free, full, stop):
    while not stop.is_set():
        try:
            buf = free.get(timeout=_POLL)
        except queue.Empty:
            continue
        if buf is None:
            break
        try:
            load_batch(buf)
        except BaseException as e:  # handed to the consumer, which raises it
            full.put(_Failure(e))
            return
        full.put(buf)


class Prefetcher(object):
    """Runs ``load_batch(buffer)`` on a daemon thread over ``count`` buffers from ``make_buffer()``."""

    def __init__(self, load_batch, make_buffer, count=4, name="caffepy-prefetch", on_close=None):
        if count < 1:
            raise CaffeError("%s: prefetch count must be at least 1, got %d" % (name, count))
        self.name = name
        self._free = queue.Queue()
        self._full = queue.Queue()
        self._stop = threading.Event()
        for _ in range(count):
            self._free.put(make_buffer())
        self._thread = threading.Thread(target=_run, name=name, daemon=True,
                                        args=(load_batch, self._free, self._full, self._stop))
        self._thread.start()
        self._failed = None
        self._on_close = on_close

    def next(self):
        """The next full buffer (waits for the thread if none is ready)."""
        if self._failed is not None:
            raise self._failed
        while True:
            try:
                item = self._full.get(timeout=_POLL)
                break
            except queue.Empty:
                if not self._thread.is_alive():
                    try:
                        item = self._full.get_nowait()
                        break
                    except queue.Empty:
                        raise CaffeError("%s: the prefetch thread has stopped" % self.name)
        if isinstance(item, _Failure):
            self._failed = item.exc
            raise item.exc
        return item

    def ready(self):
        """How many prepared buffers are waiting."""
        return self._full.qsize()

    def recycle(self, buf):
        self._free.put(buf)

    def close(self, timeout=5.0):
        """Stop the thread (idempotent); waits at most ``timeout`` seconds for it."""
        self._stop.set()
        self._free.put(None)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        if self._on_close is not None and not self._thread.is_alive():
            on_close, self._on_close = self._on_close, None
            on_close()

    @property
    def alive(self):
        return self._thread.is_alive()
