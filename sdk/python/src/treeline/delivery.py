"""The background sender: a bounded in-memory queue, batching, retries and spooling.

The training loop only appends to a deque under a short lock. One daemon thread per
run drains it: consecutive span events become POSTs (up to `max_inflight` of them on
the wire at once, so encoding the next batch overlaps the server's answer to the last),
metric points another, run updates and flush barriers go in queue order and wait for
every earlier request. Annotations of spans wait too: each is sent once every event
queued before it (its span's open among them) has been answered, or spooled ahead of
it, so the server always has the span an annotation names. Each batch gets an
Idempotency-Key once and keeps it through every retry and replay.

Queue-full policy (`on_full`): the queue is bounded by estimated bytes
(`max_queue_bytes`). A full queue only happens when the loop makes spans faster than
the sender can deliver them (a server that is down does not fill it: the spool takes
the batches at disk speed). The default, "block", makes a new span or metric point
wait for room, up to `block_timeout` seconds, so the loop slows to the delivery rate
instead of losing data; after a wait times out (a wedged sender), new spans and points
are dropped until the queue has drained to half, so training never hangs on tracing.
"drop" never waits. Either way the closes of spans already opened are always queued,
so a recorded span never stays open for want of room, and every drop is counted
(`counters`), logged, and written on the root of the trace that lost it.

Nothing the sender fails to send is lost silently: a key the server refuses (401, 403)
is said once, loudly, and the run's data then goes to the spool for `treeline-sync`
with a new key; an unexpected error (a bug, here or in a transport) spools what it was
sending, or counts it in `sender_dropped` when even that fails, and is said once with
its reason."""

import collections
import itertools
import logging
import os
import re
import threading
import time
import weakref

from .errors import InvalidValue
from .ids import coin, new_key
from .spool import Request
from .eventtext import as_json, with_field
from .transport import REFUSED, Unreachable, compress, encode, refusal, retryable

log = logging.getLogger("treeline")

_SENDERS = weakref.WeakSet()
_warned = collections.Counter()

ON_FULL = ("block", "drop")
COUNTERS = ("dropped_spans", "dropped_points", "dropped_attributes", "dropped_values",
            "converted_attributes", "cut_attributes", "blocked_seconds", "block_timeouts",
            "rejected", "refused_requests", "server_warnings", "sender_dropped")


def warn_limited(kind, message, *args, limit=5):
    _warned[kind] += 1
    if _warned[kind] <= limit:
        log.warning("treeline: " + message, *args)


_IDS = re.compile(r"\b(span|trace) \S+")
_NUMBERS = re.compile(r"\d+")
_ATTRIBUTE = re.compile(r"attributes\.\S+ was dropped: \S+")


def warning_kind(message):
    """What a server warning is about, without the ids and numbers that vary."""
    text = _ATTRIBUTE.sub("attributes.NAME was dropped: NAME", str(message))
    return _NUMBERS.sub("N", _IDS.sub(r"\1 ID", text))


class Sender:
    def __init__(self, transport, spool, *, run_id, encoding="gzip", batch_bytes=512 * 1024,
                 max_queue_bytes=64 << 20, flush_interval=1.0, max_retries=4, backoff=0.5,
                 max_backoff=8.0, max_batch_items=2000, max_request_bytes=8 << 20,
                 probe_interval=5.0, on_full="block", block_timeout=10.0, max_inflight=4):
        if on_full not in ON_FULL:
            raise InvalidValue("on_full %r is not valid; valid values are: %s"
                               % (on_full, ", ".join(ON_FULL)))
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
        self.on_full = on_full
        self.block_timeout = float(block_timeout)
        self.max_inflight = max(1, int(max_inflight))
        self._events_path = "/api/runs/%s/traces/events" % run_id
        self._annotations_path = "/api/runs/%s/traces/%%s/annotations" % run_id
        self._metrics_path = "/api/runs/%s/metrics" % run_id
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.warning_kinds = collections.Counter()  # server warnings, by kind
        self._said = set()
        self.hurry = False  # at exit: no back-off, spool at once
        # (status, code, message) once the server refused the key: from then on the
        # run's data goes to the spool, unsent, for treeline-sync with a new key.
        self.refused = None
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
        self._gen = 0  # bumped each time the sender takes the queue
        self._kicked = False
        self._dropping = False  # after a wait for room timed out, until half drained
        self._wake = threading.Event()
        self._sleep = threading.Event()
        self._roomy = threading.Event()
        self._thread = None
        self._closing = False
        self._busy = threading.Condition()
        self._outstanding = 0  # event POSTs handed to workers, not yet answered
        self._jobs = collections.deque()
        self._workers = []

    @property
    def dropped(self):
        return self.counters["dropped_spans"] + self.counters["dropped_points"]

    # -- the training loop's side -------------------------------------------------

    def room(self):
        return self._bytes + self._inflight < self.max_queue_bytes

    def admit(self, what, n=1):
        """True when there is room for a new span (what="dropped_spans") or metric
        points (what="dropped_points"); waits for it under on_full="block"."""
        used = self._bytes + self._inflight
        if used < self.max_queue_bytes:
            if self._dropping and used < self.max_queue_bytes // 2:
                self._dropping = False
                log.warning("treeline: the queue drained; recording again")
            elif self._dropping:
                return self._drop(what, n)
            return True
        if self.on_full == "drop" or self._dropping or self._on_sender_thread():
            return self._drop(what, n)
        start = time.monotonic()
        deadline = start + self.block_timeout
        while True:
            self._roomy.clear()
            self._wake.set()
            self._ensure_thread()
            if self.room():
                self.counters["blocked_seconds"] += time.monotonic() - start
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._roomy.wait(min(left, 0.05))
        self.counters["blocked_seconds"] += time.monotonic() - start
        self.counters["block_timeouts"] += 1
        self._dropping = True
        log.warning("treeline: the queue stayed full (%d bytes) for %.1f s; dropping new "
                    "spans and metric points until it has drained to half",
                    self.max_queue_bytes, self.block_timeout)
        return self._drop(what, n)

    def say_once(self, kind, message, *args):
        """Logs a warning once per run and kind."""
        if kind not in self._said:
            self._said.add(kind)
            log.warning("treeline: " + message, *args)

    def _drop(self, what, n):
        self.counters[what] += n
        self.say_once(what, "queue full (%d bytes, on_full=%s): dropped %s; run.counters() "
                      "counts what was dropped", self.max_queue_bytes, self.on_full,
                      "a span and its subtree" if what == "dropped_spans" else "metric points")
        return False

    def _on_sender_thread(self):
        current = threading.current_thread()
        return current is self._thread or current in self._workers

    def put(self, item, size):
        """Queues an item regardless of room (the caller decided). Returns the queue's
        generation: the item can be patched while the generation has not moved."""
        with self._lock:
            self._items.append(item)
            self._bytes += size
            gen = self._gen
            kick = self._bytes >= self.batch_bytes and not self._kicked
            if kick:
                self._kicked = True
        if kick:
            self._wake.set()
            self._ensure_thread()
        return gen

    def patch(self, queued, fields, size):
        """Adds fields, (name, value) pairs, to an event still waiting in the queue.
        False when the sender has taken it already (it may be on the wire)."""
        if queued is None:
            return False
        event, gen = queued
        with self._lock:
            if gen != self._gen:
                return False
            try:
                text = event[0]
                for field, value in fields:
                    text = with_field(text, field, value)
                event[0] = text
            except (TypeError, ValueError):
                return False  # no JSON form: it rides the close, which says so
            self._bytes += size
        return True

    def put_points(self, points, size):
        if not self.admit("dropped_points", len(points)):
            return False
        self.put(("m", points), size)
        return True

    def put_annotation(self, trace_id, body):
        """Queues a span's annotation (a checked PUT body) behind the span's events.
        It does not wake the sender: it leaves with the next batch."""
        self.put(("a", self._annotations_path % trace_id, body), 256)

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
            except Exception as err:  # never let the sender die on a bug (_drain keeps data)
                self._broken(err)
            if self._closing and not self._items:
                return

    def _drain(self):
        with self._drain_lock:
            with self._lock:
                items, self._items = self._items, collections.deque()
                self._inflight, self._bytes = self._inflight + self._bytes, 0
                self._gen += 1
                self._kicked = False
            per_item = self._inflight / len(items) if items else 0
            events, points = [], []
            # Annotations taken from `rest`: sent after the events before them are
            # answered; gathered so that they cost one wait per drain, not one each.
            notes = []
            rest = iter(items)
            held = None  # a run update or barrier taken from `rest`, not yet done
            try:
                for item in rest:
                    if type(item) is not tuple:  # a span event: text, patchable text or dict
                        events.append(item)
                        if len(events) >= self.max_batch_items:
                            self._post_events(events, per_item)
                            events = []
                        continue
                    tag = item[0]
                    if tag == "a":
                        notes.append(item)
                        continue
                    if tag == "m":
                        points.extend(item[1])
                        if len(points) >= self.max_batch_items:
                            self._post_list(self._metrics_path, "points", points)
                            self._release(len(points) * per_item)
                            points = []
                        continue
                    # Run updates and barriers keep their place in the stream.
                    held = item
                    self._post_events(events, per_item)
                    events = []
                    self._post_list(self._metrics_path, "points", points)
                    self._release(len(points) * per_item)
                    points = []
                    self._wait_workers()
                    self._send_notes(notes)
                    if tag == "r":
                        held = None
                        _, method, path, body, what = item
                        self._send_obj(method, path, body, what)
                    elif tag == "b":
                        held = None
                        try:
                            if self._spooling and not self.refused:
                                self._replay()
                        finally:  # flush() must never wait out its timeout for a bug
                            item[2].append(not self._spooling)
                            item[1].set()
                self._post_events(events, per_item)
                events = []
                self._post_list(self._metrics_path, "points", points)
                points = []
                self._wait_workers()
                self._send_notes(notes)
                if (self._spooling and not self.refused
                        and time.monotonic() - self._last_probe > self.probe_interval):
                    self._replay()
            except Exception as err:
                # A fault of the sender itself (the steps above catch their own): what it
                # still held is spooled in order, not dropped with the exception.
                self._rescue(err, events, points, notes,
                             rest if held is None else itertools.chain((held,), rest))
            with self._lock:
                self._inflight = 0
            self._roomy.set()

    def _rescue(self, err, events, points, notes, rest):
        self._broken(err)
        if notes:
            try:  # events on the wire may still be spooled: the annotations go after them
                self._wait_workers()
            except Exception:
                pass
        for item in rest:
            if type(item) is not tuple:
                events.append(item)
            elif item[0] == "m":
                points.extend(item[1])
            elif item[0] == "a":
                notes.append(item)
            else:
                self._keep_list(self._events_path, "events", events)
                self._keep_list(self._metrics_path, "points", points)
                self._keep_notes(notes)
                events, points = [], []
                if item[0] == "r":
                    _, method, path, body, what = item
                    self._keep_obj(method, path, body, what)
                else:
                    item[2].append(False)
                    item[1].set()
        self._keep_list(self._events_path, "events", events)
        self._keep_list(self._metrics_path, "points", points)
        self._keep_notes(notes)

    def _send_notes(self, notes):
        """Sends the annotations gathered so far, in order; the caller has waited for
        every event before them. One sent is taken off `notes`, so a fault part-way
        leaves the rest for _rescue to keep."""
        while notes:
            _, path, body = notes[0]
            self._send_obj("PUT", path, body, "span annotation")
            notes.pop(0)

    def _keep_notes(self, notes):
        for _, path, body in notes:
            self._keep_obj("PUT", path, body, "span annotation")
        del notes[:]

    def _release(self, size):
        if size:
            with self._lock:
                self._inflight = max(0, self._inflight - int(size))
            self._roomy.set()

    # Event batches may be on the wire together: the server merges a span's open and
    # close whatever their order, and ignores what it has seen, so only run updates,
    # metrics and barriers need the strict order they get from _wait_workers.
    def _post_events(self, events, per_item):
        if not events:
            return
        if self.max_inflight == 1 or self._spooling or self.refused:
            self._post_list(self._events_path, "events", events)
            self._release(len(events) * per_item)
            return
        with self._busy:
            if len(self._workers) < self.max_inflight:
                self._start_worker()
            inline = not self._workers  # no thread can start (interpreter shutdown)
            if not inline:
                while self._outstanding >= self.max_inflight:
                    self._busy.wait()
                self._outstanding += 1
                self._jobs.append((events, len(events) * per_item))
                self._busy.notify_all()
        if inline:
            self._post_list(self._events_path, "events", events)
            self._release(len(events) * per_item)

    def _start_worker(self):
        w = threading.Thread(target=self._work, name="treeline-sender-http", daemon=True)
        try:
            w.start()
        except RuntimeError:
            return
        self._workers.append(w)

    def _work(self):
        me = threading.current_thread()
        while True:
            with self._busy:
                while not self._jobs:
                    if not self._busy.wait(30.0) and not self._jobs:
                        self._workers.remove(me)  # idle for long: let the thread go
                        return
                events, size = self._jobs.popleft()
            try:
                self._post_list(self._events_path, "events", events)
            except Exception as err:  # _post_list keeps its data; this is a last resort
                self._broken(err)
                self._keep_list(self._events_path, "events", events)
            self._release(size)
            with self._busy:
                self._outstanding -= 1
                self._busy.notify_all()

    def _wait_workers(self):
        if self._outstanding:
            with self._busy:
                while self._outstanding:
                    if not self._workers:
                        # A worker could not start (interpreter shutdown): send here.
                        while self._jobs:
                            events, size = self._jobs.popleft()
                            self._post_list(self._events_path, "events", events)
                            self._release(size)
                            self._outstanding -= 1
                        break
                    self._busy.wait(0.5)

    def _post_list(self, path, field, items):
        if not items:
            return
        what = "events" if field == "events" else "metrics"
        try:
            try:
                body, enc = self._encode(field, items)
            except (TypeError, ValueError):
                items = self._encodable(items)
                if not items:
                    return
                body, enc = self._encode(field, items)
            split = len(body) > self.max_request_bytes and len(items) > 1
            if not split:
                req = Request("POST", path, body, enc, new_key(), what)
                status = self._deliver(req)
        except Exception as err:  # not the network, not the server: a fault of ours
            self._broken(err)
            self._keep_list(path, field, items)
            return
        if split or (status == 413 and len(items) > 1):
            half = len(items) // 2
            self._post_list(path, field, items[:half])
            self._post_list(path, field, items[half:])
        elif status == 413:
            self.handle(req, status, None)

    def _encode(self, field, items):
        if field != "events":
            return encode({field: items}, self.encoding)
        # Events are mostly text already (eventtext): joined, not encoded again.
        raw = '{"events":[' + ",".join(map(as_json, items)) + "]}"
        return compress(raw.encode(), self.encoding)

    def _encodable(self, items):
        kept = []
        for item in items:
            try:
                as_json(item).encode()  # a lone surrogate fails here
                kept.append(item)
            except (TypeError, ValueError) as err:
                self.counters["rejected"] += 1
                warn_limited("encode", "dropped an item with no JSON form: %s", err)
        return kept

    def _send_obj(self, method, path, obj, what):
        try:
            body, enc = encode(obj, self.encoding)
        except (TypeError, ValueError) as err:
            warn_limited("encode", "dropped a %s request with no JSON form: %s", what, err)
            return
        req = Request(method, path, body, enc, _key_for(method, what), what)
        try:
            status = self._deliver(req)
        except Exception as err:  # a fault of ours: keep the request
            self._broken(err)
            self._keep(req)
            return
        if status == 413:
            self.handle(req, 413, None)

    # -- keeping what cannot be sent ------------------------------------------------

    def _keep(self, req):
        """Spools a request (a spool that cannot take it counts and logs the loss)."""
        self._spooling = self.spool.write(req) or bool(self.spool.pending())
        self._last_probe = time.monotonic()

    def _keep_list(self, path, field, items):
        """Spools events or points without sending them; counts what cannot be."""
        if not items:
            return
        try:
            body, enc = self._encode(field, self._encodable(items))
            self._keep(Request("POST", path, body, enc, new_key(),
                               "events" if field == "events" else "metrics"))
        except Exception:
            self.counters["sender_dropped"] += len(items)

    def _keep_obj(self, method, path, obj, what):
        try:
            body, enc = encode(obj, self.encoding)
            self._keep(Request(method, path, body, enc, _key_for(method, what), what))
        except Exception:
            self.counters["sender_dropped"] += 1

    def _broken(self, err):
        """Says once per run why the sender failed other than by the network or the
        server; the data it was handling is spooled, or counted in sender_dropped."""
        if "broken" not in self._said:
            self._said.add("broken")
            log.error("treeline: sending failed with %s: %s (not a network error: a fault in "
                      "the SDK or its environment); what could not be sent is kept in %s, or "
                      "counted in run.counters()['sender_dropped']. Said once per run",
                      type(err).__name__, err, self.spool.dir, exc_info=err)

    def _refuse(self, status, payload):
        """The server refused the key: count it, say so once, and send nothing more
        with this key (the run's data goes to the spool)."""
        code, message = refusal(payload)
        with self._lock:  # several HTTP workers may be refused at once: said once
            self.counters["refused_requests"] += 1
            first = self.refused is None
            self.refused = (status, code, message)
        if first:
            log.error("treeline: the server refused this run's data: HTTP %d %s: %s. %s "
                      "Nothing more is sent with this key; the run's data is kept in %s: send "
                      "it later with TREELINE_API_KEY=<a write key> treeline-sync %s",
                      status, code, message or "(no message)",
                      key_advice(status, getattr(self.transport, "api_key", None)),
                      self.spool.dir, self.spool.dir)

    def _deliver(self, req):
        """Sends with retries, or spools. Returns the final HTTP status, or None when
        the request went to the spool."""
        if self._spooling or self.refused:
            # Something older is on disk (keep order by queueing behind it), or the key
            # was refused (keep the data for a new key).
            self._keep(req)
            return None
        attempt = 0
        while True:
            try:
                status, payload = self.transport.send(req.method, req.path, req.body,
                                                      req.encoding, req.key)
            except Unreachable as err:
                status, payload = None, str(err)
            except Exception as err:  # not the network: retrying would fail the same way
                self._broken(err)
                self._keep(req)
                return None
            if status in REFUSED:
                self._refuse(status, payload)
                self._keep(req)
                return None
            if status is not None and not retryable(status):
                if status != 413:
                    self.handle(req, status, payload)
                return status
            attempt += 1
            if self.hurry or attempt > self.max_retries:
                warn_limited("down", "server unreachable (%s); spooling to %s",
                             payload if status is None else "HTTP %d" % status, self.spool.dir)
                self._keep(req)
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
        if self.spool.refused:
            self._refuse(*self.spool.refused)
        elif self.spool.error is not None:
            self._broken(self.spool.error)

    def handle(self, req, status, payload):
        """Logs what the server refused or warned about; nothing it refuses is retried."""
        if 200 <= status < 300:
            if not isinstance(payload, dict):
                return
            rejected = payload.get("rejected")
            if rejected and isinstance(rejected, list):
                self.counters["rejected"] += len(rejected)
                first = rejected[0] if isinstance(rejected[0], dict) else {}
                warn_limited("rejected", "server rejected %d of a %s batch, e.g. %s: %s",
                             len(rejected), req.what, first.get("code"), first.get("message"))
            warnings = payload.get("warnings")
            if warnings and isinstance(warnings, list):
                self._server_warnings(warnings, req.what)
            return
        self.counters["refused_requests"] += 1
        code, message = refusal(payload)
        warn_limited("refused", "server refused a %s request (HTTP %d %s: %s); dropped",
                     req.what, status, code, message)

    def _server_warnings(self, warnings, what):
        self.counters["server_warnings"] += len(warnings)
        for w in warnings:
            message = w.get("message", "") if isinstance(w, dict) else str(w)
            kind = warning_kind(message)
            self.warning_kinds[kind] += 1
            if self.warning_kinds[kind] == 1:  # once per kind of warning
                log.warning("treeline: the server stored %s with a warning: %s (logged "
                            "once per kind; run.counters()['server_warnings'] counts them)",
                            what, message)


def _key_for(method, what):
    """The Idempotency-Key of a run update or annotation, or None. The run's PUT is
    harmless to repeat (the server ignores the key there); an annotation's PUT carries
    one, so a retry after a lost answer is the first answer replayed, never a second
    write over a newer one."""
    return new_key() if method == "POST" or what == "span annotation" else None


def key_advice(status, api_key, where="TREELINE_API_KEY (or api_key=)"):
    """What to do about a refused key, for a message; `where` is how the key is given."""
    if status == 401 and not api_key:
        return ("The server needs a key: give a write key as %s (`treeline keys create "
                "--scope write` makes one)." % where)
    if status == 401:
        return ("Check %s: the server does not know this key (mistyped, or revoked); give a "
                "write key (`treeline keys create --scope write` makes one)." % where)
    return ("This key may not write here: give a write key for this project as %s "
            "(`treeline keys create --scope write` makes one)." % where)


def _after_fork_in_child():
    # The parent still owns and sends what was queued before the fork.
    for sender in list(_SENDERS):
        sender._reset()
        sender._spooling = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
