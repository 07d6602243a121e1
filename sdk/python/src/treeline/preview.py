"""Bounded, redacted previews of inputs, outputs and exception messages.

Everything here runs in the caller's thread when a body is recorded, so what is queued,
spooled or sent is already redacted and cut to size."""

import json
import math
import reprlib

from .redact import MASK, is_secret_key, redact_text

DEFAULT_LIMIT = 8192  # characters of JSON text per body
_MAX_DEPTH = 12
_MAX_ITEMS = 100  # per container
_MAX_NODES = 2000  # per body, so a huge structure costs bounded time


class NoJSONForm(Exception):
    pass


class _Walk:
    __slots__ = ("limit", "nodes", "path")

    def __init__(self, limit):
        self.limit = limit
        self.nodes = 0
        self.path = set()

    def value(self, v, depth):
        self.nodes += 1
        t = type(v)
        if v is None or t is bool or t is int:
            return v
        if t is str:
            return self.text(v)
        if t is float:
            if math.isfinite(v):
                return v
            raise NoJSONForm("the float %r has no JSON form" % v)
        if self.nodes > _MAX_NODES or depth > _MAX_DEPTH:
            return "…"
        if isinstance(v, dict):
            return self.mapping(v, depth)
        if isinstance(v, (list, tuple)):
            return self.sequence(v, depth)
        if isinstance(v, (bytes, bytearray)):
            try:
                return self.text(bytes(v).decode("utf-8"))
            except UnicodeDecodeError:
                raise NoJSONForm("bytes that are not UTF-8 have no JSON form") from None
        if isinstance(v, str):
            return self.text(str(v))
        if isinstance(v, bool):
            return bool(v)
        if isinstance(v, (int, float)):  # IntEnum, numpy.float64: json accepts these too
            return self.value(int(v) if isinstance(v, int) else float(v), depth)
        raise NoJSONForm("a %s has no JSON form" % type(v).__name__)

    def text(self, s):
        s = redact_text(s) if len(s) <= 4 * self.limit else redact_text(s[: 4 * self.limit])
        return s if len(s) <= self.limit else s[: self.limit] + "…"

    def enter(self, v):
        if id(v) in self.path:
            raise NoJSONForm("a %s that contains itself has no JSON form" % type(v).__name__)
        self.path.add(id(v))

    def mapping(self, d, depth):
        self.enter(d)
        out = {}
        for i, (k, v) in enumerate(d.items()):
            if i == _MAX_ITEMS:
                out["…"] = "%d more keys" % (len(d) - i)
                break
            out[self.key(k)] = MASK if _secret_body(k, v) else self.value(v, depth + 1)
        self.path.discard(id(d))
        return out

    def sequence(self, seq, depth):
        self.enter(seq)
        out = [self.value(v, depth + 1) for v in seq[:_MAX_ITEMS]]
        if len(seq) > _MAX_ITEMS:
            out.append("… %d more items" % (len(seq) - _MAX_ITEMS))
        self.path.discard(id(seq))
        return out

    @staticmethod
    def key(k):
        # The same keys json.dumps accepts, turned into strings the same way.
        t = type(k)
        if t is str:
            return k
        if t is bool or k is None:
            return json.dumps(k)
        if t is int or (t is float and math.isfinite(k)):
            return repr(k)
        raise NoJSONForm("a dict key of type %s has no JSON form" % t.__name__)


def _secret_body(key, value):
    if type(key) is not str or not is_secret_key(key):
        return False
    return not (value is None or isinstance(value, (bool, int, float)))


_repr = reprlib.Repr()
_repr.maxlevel = 4
_repr.maxstring = 2000
_repr.maxother = 2000
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 50


def preview(value, limit=DEFAULT_LIMIT):
    """Returns (body, error): a JSON-ready, redacted body of at most about `limit`
    characters, and why the value had to be sent as its repr (None when it did not)."""
    try:
        body = _Walk(limit).value(value, 0)
        if type(body) is str:
            return body, None
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        if len(text) > limit:
            # A cut document is no longer JSON: keep its head as text.
            return text[:limit] + "…", None
        return body, None
    except NoJSONForm as exc:
        return _as_repr(value, limit), str(exc)
    except Exception as exc:  # a broken __len__/__getitem__/items in user code
        return _as_repr(value, limit), "%s while serializing: %s" % (type(exc).__name__, exc)


def _as_repr(value, limit):
    try:
        text = _repr.repr(value)
    except Exception as exc:
        text = "<%s: repr failed with %s>" % (type(value).__name__, type(exc).__name__)
    text = redact_text(text)
    return text if len(text) <= limit else text[:limit] + "…"


def message_preview(exc, limit=DEFAULT_LIMIT):
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable %s>" % type(exc).__name__
    text = redact_text(text[: 4 * limit])
    return text if len(text) <= limit else text[:limit] + "…"
