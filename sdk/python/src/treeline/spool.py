"""The disk spool: requests the server could not take, kept in order until replayed.

One file per request: a JSON header line (method, path, Idempotency-Key, encoding,
the URL it was meant for; never the API key), then the exact body bytes. Replaying a
file sends the same bytes with the same key, so the server stores it once however
often it is replayed."""

import json
import logging
import os
import threading
import time

from .transport import REFUSED, Unreachable, retryable

log = logging.getLogger("treeline")
SUFFIX = ".tlspool"
# A spooled request the server answers but will not take (a 5xx it keeps giving) is
# set aside after this many answers, or this long after the first, so one poison batch
# cannot hold back everything behind it. No answer at all (the server down) never
# counts, nor does a refused key (401, 403: the batch is fine, the key is not, and a
# new key sends it): that data waits for as long as it takes.
MAX_ANSWERED_TRIES = 20
MAX_ANSWERED_AGE_S = 3600.0


class Request:
    __slots__ = ("method", "path", "body", "encoding", "key", "what")

    def __init__(self, method, path, body, encoding, key, what):
        self.method, self.path, self.body = method, path, body
        self.encoding, self.key, self.what = encoding, key, what


class Spool:
    def __init__(self, directory, max_bytes=1 << 30, url=None):
        self.dir = directory
        self.max_bytes = max_bytes
        self.url = url
        self._seq = 0
        self._lock = threading.Lock()
        self.bytes = sum(size for _, size in _listing(directory))
        self.dropped = 0
        self.set_aside = 0
        self.refused = None  # (status, payload) of the refusal that stopped the last replay
        self.error = None  # the unexpected exception that stopped the last replay

    def pending(self):
        return [path for path, _ in _listing(self.dir)]

    def write(self, req):
        """Keeps a request on disk; False when it had to be dropped (spool full, disk
        error), which is logged."""
        header = {"v": 1, "method": req.method, "path": req.path, "key": req.key,
                  "encoding": req.encoding, "what": req.what, "url": self.url}
        data = json.dumps(header).encode() + b"\n" + req.body
        if self.bytes + len(data) > self.max_bytes:
            self.dropped += 1
            log.warning("treeline: spool %s is full (%d bytes); dropped a %s batch",
                        self.dir, self.max_bytes, req.what)
            return False
        with self._lock:
            self._seq += 1
            # Time first so files of several processes of one run sort by age; the
            # sequence keeps one process's files in order within a microsecond.
            name = "%017d-%d-%08d%s" % (time.time_ns() // 1000, os.getpid(), self._seq, SUFFIX)
        try:
            os.makedirs(self.dir, exist_ok=True)
            path = os.path.join(self.dir, name)
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as err:
            self.dropped += 1
            log.warning("treeline: could not spool a %s batch to %s: %s", req.what, self.dir, err)
            return False
        self.bytes += len(data)
        return True

    def replay(self, transport, handle=None):
        """Sends spooled requests oldest first. Stops at the first one the server cannot
        take yet, or refuses the key for (`refused` then holds the answer). Returns
        (sent, remaining)."""
        files = self.pending()
        sent = 0
        self.refused = self.error = None
        for i, path in enumerate(files):
            outcome, why = replay_file(path, transport, handle)
            if outcome in ("wait", "refused", "error"):
                if outcome == "refused":
                    self.refused = why
                elif outcome == "error":
                    self.error = why
                return sent, len(files) - i
            if outcome == "sent":
                sent += 1
            if outcome == "poison":
                self.set_aside += 1
        self.bytes = sum(size for _, size in _listing(self.dir))
        return sent, 0


def read_file(path):
    with open(path, "rb") as f:
        data = f.read()
    head, _, body = data.partition(b"\n")
    header = json.loads(head)
    return header, Request(header["method"], header["path"], body, header.get("encoding"),
                           header.get("key"), header.get("what", "batch"))


def replay_file(path, transport, handle=None):
    """(outcome, why). The outcome is 'sent', 'rejected' (the server refused it for
    good; kept as .rejected for a person to look at), 'poison' (answered with a
    retryable error too often or too long; also kept as .rejected), 'gone' (another
    process replayed it), 'wait', 'refused' (the key was refused: the file stays for a
    new key; why is (status, payload)) or 'error' (sending failed for another reason
    than the network: the file stays; why is the exception)."""
    try:
        _, req = read_file(path)
    except FileNotFoundError:
        return "gone", None
    except (OSError, ValueError, KeyError) as err:
        log.warning("treeline: unreadable spool file %s (%s); set aside", path, err)
        _set_aside(path)
        return "rejected", None
    try:
        status, payload = transport.send(req.method, req.path, req.body, req.encoding, req.key)
    except Unreachable:
        return "wait", None
    except Exception as err:  # not the network: keep the file, and say why
        return "error", err
    if status in REFUSED:
        return "refused", (status, payload)
    if retryable(status):
        tries, first = _count_answer(path)
        if tries < MAX_ANSWERED_TRIES and time.time() - first < MAX_ANSWERED_AGE_S:
            return "wait", None
        err = (payload or {}).get("error", {}) if isinstance(payload, dict) else {}
        log.warning("treeline: the server answered a spooled %s batch with HTTP %d (%s) "
                    "%d times since %s; set aside as %s so the rest can go",
                    req.what, status, err.get("code", "?"), tries,
                    time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(first)),
                    path[: -len(SUFFIX)] + ".rejected")
        _set_aside(path)
        return "poison", None
    if handle is not None:
        handle(req, status, payload)
    if status >= 400:
        _set_aside(path)
        return "rejected", None
    for done in (path, path + ".tries"):
        try:
            os.remove(done)
        except FileNotFoundError:
            pass
    return "sent", None


def _count_answer(path):
    """Counts one more retryable answer for a spooled file, in a `.tries` file beside
    it: (answers so far, time of the first)."""
    tries_path = path + ".tries"
    tries, first = 0, time.time()
    try:
        with open(tries_path) as f:
            saved = json.load(f)
        tries, first = int(saved["tries"]), float(saved["first"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    tries += 1
    try:
        with open(tries_path, "w") as f:
            json.dump({"tries": tries, "first": first}, f)
    except OSError:
        pass
    return tries, first


def _set_aside(path):
    try:
        os.replace(path, path[: -len(SUFFIX)] + ".rejected")
    except OSError:
        pass
    try:
        os.remove(path + ".tries")
    except OSError:
        pass


def _listing(directory):
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(SUFFIX))
    except OSError:
        return []
    out = []
    for n in names:
        path = os.path.join(directory, n)
        try:
            out.append((path, os.path.getsize(path)))
        except OSError:
            pass
    return out
