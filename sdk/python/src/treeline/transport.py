"""HTTP to the Treeline server: one request, no retries (the sender owns those)."""

import gzip
import http.client
import json
import urllib.error
import urllib.request

from .version import __version__

try:  # optional: better ratio and speed than gzip when installed
    import zstandard as _zstd
except ImportError:  # pragma: no cover - depends on the environment
    _zstd = None

USER_AGENT = "treeline-python/" + __version__
_MIN_COMPRESS = 1024  # small bodies are not worth the CPU


class Unreachable(Exception):
    """The server could not be reached or cannot take data now: keep the data."""


def pick_encoding(preference="auto"):
    if preference == "auto":
        return "zstd" if _zstd is not None else "gzip"
    if preference == "zstd" and _zstd is None:
        raise ValueError("compression 'zstd' needs the zstandard package")
    if preference not in ("gzip", "zstd", "none"):
        raise ValueError("compression must be one of: auto, gzip, zstd, none")
    return preference


def encode(obj, encoding):
    """JSON body bytes and the Content-Encoding to send them with (None for plain)."""
    raw = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    if encoding == "none" or len(raw) < _MIN_COMPRESS:
        return raw, None
    if encoding == "zstd":
        return _zstd.ZstdCompressor(level=3).compress(raw), "zstd"
    # mtime=0 keeps the bytes identical if the same batch is ever encoded twice.
    return gzip.compress(raw, compresslevel=5, mtime=0), "gzip"


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
        # Seconds the last answer asked the client to wait (Retry-After), or None.
        self.retry_after = None
        self._opener = make_opener(self.url)

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


def retryable(status):
    """Statuses after which the same request may succeed later."""
    return status >= 500 or status in (401, 403, 408, 425, 429)
