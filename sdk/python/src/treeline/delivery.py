"""The background sender: a bounded in-memory queue, batching, retries and spooling.

The training loop only appends to a deque under a short lock. One daemon thread per
run drains it: consecutive span events become one POST, metric points another, run
updates go in queue order. Each batch gets an Idempotency-Key once and keeps it through
every retry and replay.

Queue-full policy: the queue is bounded by estimated bytes (`max_queue_bytes`). When it
is full, *new* spans are handed out inert (their whole subtree records nothing) and new
metric points are dropped; the closes of spans already opened are always queued, so a
recorded span never stays open for want of room. Drops are counted (`dropped`) and
logged once. The training loop is never blocked."""

import collections
import logging
import os
import threading
import time
import weakref

from .ids import coin, new_key
from .spool import Request
from .transport import Unreachable, encode, retryable

log = logging.getLogger("treeline")

_SENDERS = weakref.WeakSet()
_warned = collections.Counter()


def warn_limited(kind, message, *args, limit=5):
    _warned[kind] += 1
    if _warned[kind] <= limit:
        log.warning("treeline: " + message, *args)


class Sender:
    def __init__(self, transport, spool, *, run_id, encoding="gzip", batch_bytes=512 * 1024,
                 max_queue_bytes=64 << 20, flush_interval=1.0, max_retries=4, backoff=0.5,
                 max_backoff=8.0, max_batch_items=2000, max_request_bytes=8 << 20,
                 probe_interval=5.0):
        self.transport = transport
        self.spool = spool
        self.encoding = encoding
        self.batch_bytes = batch_bytes
        self.max_queue_bytes = max_queue_bytes
        self.flush_interval = flush_interval
        self.max_retries = max_retries
        self.backoff, self.max_backoff = backoff, max_backoff
        self.max_batch_items = max_batch_items
        self.max_request_bytes = max_request_bytes
        self.probe_interval = probe_interval
        self._events_path = "/api/runs/%s/traces/events" % run_id
        self._metrics_path = "/api/runs/%s/metrics" % run_id
        self.dropped = 0  # spans and points refused because the queue was full
        self.rejected = 0  # events or points the server refused
        self.hurry = False  # at exit: no back-off, spool at once
        self._spooling = bool(spool.pending())
        self._last_probe = 0.0
        self._reset()
        _SENDERS.add(self)

    def _reset(self):
        self._lock = threading.Lock()
        self._drain_lock = threading.Lock()
        self._items = collections.deque()
        self._bytes = 0
        self._inflight = 0
        self._kicked = False
        self._wake = threading.Event()
        self._sleep = threading.Event()
        self._thread = None
        self._closing = False

    # -- the training loop's side -------------------------------------------------

    def room(self):
        return self._bytes + self._inflight < self.max_queue_bytes

    def put(self, item, size):
        """Queues an item regardless of room (the caller decided)."""
        with self._lock:
            self._items.append(item)
            self._bytes += size
            kick = self._bytes >= self.batch_bytes and not self._kicked
            if kick:
                self._kicked = True
        if kick:
            self._wake.set()
            self._ensure_thread()

    def put_points(self, points, size):
        if not self.room():
            self.dropped += len(points)
            warn_limited("full", "queue full (%d bytes); dropping metric points and new spans "
                         "until it drains", self.max_queue_bytes, limit=1)
            return False
        self.put(("m", points), size)
        return True

    def put_request(self, method, path, body, what):
        self.put(("r", method, path, body, what), 256)
        self._wake.set()
        self._ensure_thread()

    def flush(self, timeout=30.0):
        """Waits until everything queued before this call was sent or spooled and one
        replay of the spool was tried. True when nothing is left waiting on disk."""
        done = threading.Event()
        result = []
        self.put(("b", done, result), 0)
        self._wake.set()
        if not self._ensure_thread():
            self._drain()  # no thread can start (interpreter shutdown): do it here
        if not done.wait(timeout):
            return False
        return bool(result and result[0])

    def hurry_up(self):
        """From now on: no back-off; what cannot be sent at once goes to the spool."""
        self.hurry = True
        self._sleep.set()

    def close(self, timeout=30.0):
        ok = self.flush(timeout)
        self._closing = True
        self._wake.set()
        return ok

    # -- the sender thread --------------------------------------------------------

    def _ensure_thread(self):
        t = self._thread
        if t is not None and t.is_alive():
            return True
        self._closing = False
        t = threading.Thread(target=self._loop, name="treeline-sender", daemon=True)
        try:
            t.start()
        except RuntimeError:  # "can't create new thread at interpreter shutdown"
            return False
        self._thread = t
        return True

    def _loop(self):
        while True:
            self._wake.wait(self.flush_interval)
            self._wake.clear()
            try:
                self._drain()
            except Exception:  # never let the sender die on a bug; keep logging it
                log.exception("treeline: sender error")
            if self._closing and not self._items:
                return

    def _drain(self):
        with self._drain_lock:
            with self._lock:
                items, self._items = self._items, collections.deque()
                self._inflight, self._bytes = self._bytes, 0
                self._kicked = False
            events, points = [], []
            for item in items:
                if type(item) is dict:
                    events.append(item)
                    if len(events) >= self.max_batch_items:
                        self._post_list(self._events_path, "events", events)
                        events = []
                    continue
                tag = item[0]
                if tag == "m":
                    points.extend(item[1])
                    if len(points) >= self.max_batch_items:
                        self._post_list(self._metrics_path, "points", points)
                        points = []
                    continue
                # Run updates and barriers keep their place in the stream.
                self._post_list(self._events_path, "events", events)
                self._post_list(self._metrics_path, "points", points)
                events, points = [], []
                if tag == "r":
                    _, method, path, body, what = item
                    self._send_obj(method, path, body, what)
                elif tag == "b":
                    if self._spooling:
                        self._replay()
                    item[2].append(not self._spooling)
                    item[1].set()
            self._post_list(self._events_path, "events", events)
            self._post_list(self._metrics_path, "points", points)
            self._inflight = 0
            if self._spooling and time.monotonic() - self._last_probe > self.probe_interval:
                self._replay()

    def _post_list(self, path, field, items):
        if not items:
            return
        what = "events" if field == "events" else "metrics"
        try:
            body, enc = encode({field: items}, self.encoding)
        except (TypeError, ValueError):
            items = self._encodable(items)
            if not items:
                return
            body, enc = encode({field: items}, self.encoding)
        if len(body) > self.max_request_bytes and len(items) > 1:
            half = len(items) // 2
            self._post_list(path, field, items[:half])
            self._post_list(path, field, items[half:])
            return
        req = Request("POST", path, body, enc, new_key(), what)
        status = self._deliver(req)
        if status == 413:
            if len(items) == 1:
                self.handle(req, status, None)
                return
            half = len(items) // 2
            self._post_list(path, field, items[:half])
            self._post_list(path, field, items[half:])

    def _encodable(self, items):
        kept = []
        for item in items:
            try:
                encode(item, "none")
                kept.append(item)
            except (TypeError, ValueError) as err:
                self.rejected += 1
                warn_limited("encode", "dropped an item with no JSON form: %s", err)
        return kept

    def _send_obj(self, method, path, obj, what):
        try:
            body, enc = encode(obj, self.encoding)
        except (TypeError, ValueError) as err:
            warn_limited("encode", "dropped a %s request with no JSON form: %s", what, err)
            return
        # PUT is idempotent by itself; every POST carries a key.
        key = new_key() if method == "POST" else None
        req = Request(method, path, body, enc, key, what)
        if self._deliver(req) == 413:
            self.handle(req, 413, None)

    def _deliver(self, req):
        """Sends with retries, or spools. Returns the final HTTP status, or None when
        the request went to the spool."""
        if self._spooling:
            # Something older is on disk: keep order by queueing behind it.
            self.spool.write(req)
            return None
        attempt = 0
        while True:
            try:
                status, payload = self.transport.send(req.method, req.path, req.body,
                                                      req.encoding, req.key)
            except Unreachable as err:
                status, payload = None, str(err)
            if status is not None and not retryable(status):
                if status != 413:
                    self.handle(req, status, payload)
                return status
            attempt += 1
            if self.hurry or attempt > self.max_retries:
                warn_limited("down", "server unreachable (%s); spooling to %s",
                             payload if status is None else "HTTP %d" % status, self.spool.dir)
                self._spooling = self.spool.write(req) or bool(self.spool.pending())
                self._last_probe = time.monotonic()
                return None
            delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
            delay *= 0.5 + coin() / 2
            # A server shedding load says when to come back: never sooner.
            asked = getattr(self.transport, "retry_after", None)
            self._sleep.wait(max(delay, asked or 0))

    def _replay(self):
        self._last_probe = time.monotonic()
        _, remaining = self.spool.replay(self.transport, self.handle)
        self._spooling = remaining > 0

    def handle(self, req, status, payload):
        """Logs what the server refused; nothing it refuses is retried."""
        if 200 <= status < 300:
            rejected = (payload or {}).get("rejected") if isinstance(payload, dict) else None
            if rejected:
                self.rejected += len(rejected)
                first = rejected[0]
                warn_limited("rejected", "server rejected %d of a %s batch, e.g. %s: %s",
                             len(rejected), req.what, first.get("code"), first.get("message"))
            return
        err = (payload or {}).get("error", {}) if isinstance(payload, dict) else {}
        warn_limited("refused", "server refused a %s request (HTTP %d %s: %s); dropped",
                     req.what, status, err.get("code", "?"), err.get("message", ""))


def _after_fork_in_child():
    # The parent still owns and sends what was queued before the fork.
    for sender in list(_SENDERS):
        sender._reset()
        sender._spooling = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
