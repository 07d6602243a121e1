"""HTTP to the Treeline server: one request, no retries (the sender owns those)."""

import gzip
import http.client
import json
import threading
import urllib.error
import urllib.request

from .errors import InvalidValue, TreelineError
from .version import __version__

# zstd compresses JSON better than gzip at a fraction of its CPU. Python 3.14 has it in
# the standard library; before that, the zstandard package provides it when installed.
try:
    from compression import zstd as _std_zstd
except ImportError:  # pragma: no cover - depends on the interpreter
    _std_zstd = None
try:
    import zstandard as _zstd
except ImportError:  # pragma: no cover - depends on the environment
    _zstd = None

USER_AGENT = "treeline-python/" + __version__
_MIN_COMPRESS = 1024  # small bodies are not worth the CPU


class Unreachable(TreelineError):
    """The server could not be reached or cannot take data now: keep the data."""


def zstd_source():
    """Where zstd comes from here: "compression.zstd", "zstandard", or None."""
    if _std_zstd is not None:
        return "compression.zstd"
    if _zstd is not None:
        return "zstandard"
    return None


def compression():
    """The Content-Encoding that compression="auto" sends with, and where it comes from:
    "zstd (compression.zstd)", "zstd (zstandard)" or "gzip"."""
    source = zstd_source()
    return "zstd (%s)" % source if source else "gzip"


def pick_encoding(preference="auto"):
    if preference == "auto":
        return "zstd" if zstd_source() else "gzip"
    if preference == "zstd" and not zstd_source():
        raise InvalidValue("compression 'zstd' needs Python 3.14 (compression.zstd) or the "
                           "zstandard package; use 'auto' to fall back to gzip")
    if preference not in ("gzip", "zstd", "none"):
        raise InvalidValue("compression must be one of: auto, gzip, zstd, none; got %r"
                           % (preference,))
    return preference


_local = threading.local()


def _zstd_compress(raw):
    if _std_zstd is not None:
        return _std_zstd.compress(raw, level=1)
    c = getattr(_local, "zstd", None)
    if c is None:  # a compressor per thread: they are not safe to share
        c = _local.zstd = _zstd.ZstdCompressor(level=1)
    return c.compress(raw)


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def encode(obj, encoding):
    """JSON body bytes and the Content-Encoding to send them with (None for plain)."""
    return compress(_dumps(obj).encode(), encoding)


def compress(raw, encoding):
    """JSON bytes compressed with `encoding` ("zstd", "gzip" or "none"; small bodies
    are left plain) and the Content-Encoding to send them with (None for plain)."""
    if encoding == "none" or len(raw) < _MIN_COMPRESS:
        return raw, None
    if encoding == "zstd":
        return _zstd_compress(raw), "zstd"
    # Level 1: a third of level 5's CPU for a slightly larger body; the sender's CPU is
    # the training process's. mtime=0 keeps the bytes of a batch encoded twice equal.
    return gzip.compress(raw, compresslevel=1, mtime=0), "gzip"


def make_opener(url):
    """One opener per client, built once: urlopen() builds a new one per call, creating
    an SSL context each time even for http; a fork taken mid-way (a worker started while
    the sender runs) would leave the child stuck on OpenSSL's locks. No redirect
    handler: a 3xx comes back as an HTTPError, like any other answer that is not 2xx."""
    opener = urllib.request.OpenerDirector()
    handlers = [urllib.request.ProxyHandler(), urllib.request.HTTPHandler(),
                urllib.request.HTTPDefaultErrorHandler(), urllib.request.HTTPErrorProcessor()]
    if url.startswith("https:"):
        handlers.append(urllib.request.HTTPSHandler())
    for handler in handlers:
        opener.add_handler(handler)
    return opener


class Transport:
    def __init__(self, url, api_key=None, timeout=10.0):
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self._opener = make_opener(self.url)
        self._local = threading.local()

    @property
    def retry_after(self):
        """Seconds the last answer in this thread asked the client to wait
        (Retry-After), or None. Per thread: the sender has several requests out."""
        return getattr(self._local, "retry_after", None)

    @retry_after.setter
    def retry_after(self, value):
        self._local.retry_after = value

    def send(self, method, path, body, content_encoding=None, idempotency_key=None):
        """Returns (status, parsed JSON or None). Raises Unreachable for connection
        failures; HTTP errors come back as their status."""
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
                   "Accept": "application/json"}
        if content_encoding:
            headers["Content-Encoding"] = content_encoding
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        # HTTPError is a URLError, so it must be caught first (below it is).
        req = urllib.request.Request(self.url + path, data=body, headers=headers, method=method)
        self.retry_after = None
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                return resp.status, _parse(resp.read())
        except urllib.error.HTTPError as err:
            self.retry_after = retry_after(err.headers.get("Retry-After"))
            try:
                payload = _parse(err.read())
            except Exception:
                payload = None
            return err.code, payload
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as err:
            raise Unreachable("%s %s: %s" % (method, self.url + path, err)) from None


def _parse(data):
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def retry_after(value):
    """The whole seconds a Retry-After header asks for, at most 60; None when it
    asks for nothing this client understands (an HTTP date, say)."""
    try:
        return min(60, max(0, int(str(value).strip())))
    except (TypeError, ValueError):
        return None


# The server refused the key (none, a wrong or revoked one, a read key, a key of another
# project): the same request with the same key never succeeds, but a new key can send it.
REFUSED = (401, 403)


def retryable(status):
    """Statuses after which the same request, with the same key, may succeed later."""
    return status >= 500 or status in (408, 425, 429)


def refusal(payload):
    """The code and message of a refusal's answer ({"error": {"code", "message"}})."""
    err = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(err, dict):
        return "?", ""
    return str(err.get("code") or "?"), str(err.get("message") or "")
