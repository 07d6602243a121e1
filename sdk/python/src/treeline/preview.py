"""Bounded, redacted previews of inputs, outputs and exception messages.

Everything here runs in the caller's thread when a body is recorded, so what is queued,
spooled or sent is already redacted and cut to size."""

import json
import math
import re
import reprlib
import traceback

from .redact import MASK, is_secret_key, redact_text

DEFAULT_LIMIT = 8192  # characters of JSON text per body
_MAX_DEPTH = 12
_MAX_ITEMS = 100  # per container
_MAX_NODES = 2000  # per body, so a huge structure costs bounded time


class NoJSONForm(Exception):
    pass


# Characters JSON escapes: a string holding one may grow up to 6-fold as JSON text.
_ESCAPED = re.compile(r'[\x00-\x1f"\\]')


class _Walk:
    """Copies a value into its JSON-ready, redacted form, and keeps an upper bound of
    the length of its JSON text (`size`), so that most bodies need not be encoded
    once more just to be measured. `cut` says whether any of the value was left out."""

    __slots__ = ("limit", "nodes", "path", "size", "cut")

    def __init__(self, limit):
        self.limit = limit
        self.nodes = 0
        self.path = set()
        self.size = 0
        self.cut = False

    def value(self, v, depth):
        self.nodes += 1
        t = type(v)
        if t is float:
            if math.isfinite(v):
                self.size += 25
                return v
            raise NoJSONForm("the float %r has no JSON form" % v)
        if v is None or t is bool or t is int:
            self.size += 21 if t is int else 5
            return v
        if t is str:
            return self.text(v)
        if self.nodes > _MAX_NODES or depth > _MAX_DEPTH:
            self.size += 5
            self.cut = True
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
        if len(s) > 4 * self.limit:
            s = s[: 4 * self.limit]
            self.cut = True
        s = redact_text(s)
        if len(s) > self.limit:
            s = s[: self.limit] + "…"
            self.cut = True
        self.size += len(s) * (6 if _ESCAPED.search(s) else 1) + 2
        return s

    def enter(self, v):
        if id(v) in self.path:
            raise NoJSONForm("a %s that contains itself has no JSON form" % type(v).__name__)
        self.path.add(id(v))

    def mapping(self, d, depth):
        self.enter(d)
        size = 2
        out = {}
        info = _KEY_INFO
        for i, (k, v) in enumerate(d.items()):
            if i == _MAX_ITEMS:
                out["…"] = "%d more keys" % (len(d) - i)
                size += 40
                self.cut = True
                break
            known = info.get(k) if type(k) is str else None
            if known is None:
                known = _key_info(k)
            key, key_size, secret = known
            size += key_size
            if secret and not (v is None or isinstance(v, (bool, int, float))):
                out[key] = MASK
                size += len(MASK) + 2
            else:
                out[key] = self.value(v, depth + 1)
        self.size += size
        self.path.discard(id(d))
        return out

    def sequence(self, seq, depth):
        self.enter(seq)
        self.size += 2 + len(seq)
        out = []
        append = out.append
        for v in seq[:_MAX_ITEMS]:
            t = type(v)
            if t is int:  # the common case, numbers, without a call per item
                self.size += 21
                self.nodes += 1
                append(v)
            elif t is float and math.isfinite(v):
                self.size += 25
                self.nodes += 1
                append(v)
            else:
                append(self.value(v, depth + 1))
        if len(seq) > _MAX_ITEMS:
            out.append("… %d more items" % (len(seq) - _MAX_ITEMS))
            self.size += 40
            self.cut = True
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


_KEY_INFO = {}  # str key -> (key, its JSON size with ':' and ',', secret-looking?)


def _key_info(k):
    key = _Walk.key(k)
    known = (key, len(key) * (6 if _ESCAPED.search(key) else 1) + 4,
             type(k) is str and is_secret_key(k))
    if type(k) is str:
        if len(_KEY_INFO) > 4096:
            _KEY_INFO.clear()
        _KEY_INFO[k] = known
    return known


_repr = reprlib.Repr()
_repr.maxlevel = 4
_repr.maxstring = 2000
_repr.maxother = 2000
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 50


def preview(value, limit=DEFAULT_LIMIT):
    """Returns (body, error): a JSON-ready, redacted body of at most about `limit`
    characters, and why the value had to be sent as its repr (None when it did not)."""
    body, error, _, _ = sized_preview(value, limit)
    return body, error


def _numbers(seq):
    """A copy of a list of plain numbers and its JSON size bound; None for anything else."""
    if len(seq) > _MAX_ITEMS:
        return None
    for v in seq:
        t = type(v)
        if not (t is int or (t is float and math.isfinite(v))):
            return None
    return list(seq), 2 + 26 * len(seq)


def _flat(value, limit):
    """The body of a shallow value (a dict of scalars, strings and number lists, a list
    of numbers, or a list of such dicts: chat messages), as the walk would make it,
    without the walk; None when the value needs the walk (deeper nesting, secret-looking
    keys, long strings, other types)."""
    t = type(value)
    if t is dict:
        return _flat_dict(value, limit)
    if t is not list and t is not tuple:
        return None
    if not value or type(value[0]) is not dict:
        return _numbers(value)
    if len(value) > _MAX_ITEMS:
        return None
    out = []
    size = 2 + len(value)
    nodes = 1
    for item in value:
        if type(item) is not dict:
            return None
        flat = _flat_dict(item, limit)
        if flat is None:
            return None
        out.append(flat[0])
        size += flat[1]
        nodes += 1 + len(item)
        if nodes > _MAX_NODES // 2 or size > limit:
            return None
    return out, size


def _flat_dict(value, limit):
    if len(value) > _MAX_ITEMS:
        return None
    out = {}
    size = 2
    info = _KEY_INFO
    for k, v in value.items():
        if type(k) is not str:
            return None
        known = info.get(k)
        if known is None:
            known = _key_info(k)
        if known[2]:
            return None
        size += known[1]
        tv = type(v)
        if tv is int or tv is bool or v is None:
            size += 21
        elif tv is float:
            if not math.isfinite(v):
                return None
            size += 25
        elif tv is str:
            if len(v) > limit:
                return None
            v = redact_text(v)
            if len(v) > limit:
                return None
            size += len(v) * (6 if _ESCAPED.search(v) else 1) + 2
        elif tv is list or tv is tuple:
            numbers = _numbers(v)
            if numbers is None:
                return None
            v = numbers[0]
            size += numbers[1]
        else:
            return None
        out[k] = v
    return out, size


def sized_preview(value, limit=DEFAULT_LIMIT):
    """preview(), at least the length of the body's JSON text (what the queue bound
    counts), and whether the body was cut (the event then says so: input_truncated,
    output_truncated). The walk's bound spares encoding the body just to measure it;
    only a body that may be over the limit is encoded here, to be cut."""
    try:
        flat = _flat(value, limit)
        if flat is not None and flat[1] <= limit:
            return flat[0], None, flat[1], False
        walk = _Walk(limit)
        body = walk.value(value, 0)
        t = type(body)
        if t is str or walk.size <= limit:  # an upper bound: fits without measuring
            return body, None, walk.size, walk.cut
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        if len(text) > limit:
            # A cut document is no longer JSON: keep its head as text.
            cut = text[:limit] + "…"
            return cut, None, len(json.dumps(cut, ensure_ascii=False)), True
        return body, None, len(text), walk.cut
    except NoJSONForm as exc:
        text, cut = _as_repr(value, limit)
        return text, str(exc), len(text) + 2, cut
    except Exception as exc:  # a broken __len__/__getitem__/items in user code
        text, cut = _as_repr(value, limit)
        return text, "%s while serializing: %s" % (type(exc).__name__, exc), len(text) + 2, cut


def _as_repr(value, limit):
    try:
        text = _repr.repr(value)
    except Exception as exc:
        text = "<%s: repr failed with %s>" % (type(value).__name__, type(exc).__name__)
    text = redact_text(text)
    return (text, False) if len(text) <= limit else (text[:limit] + "…", True)


def traceback_preview(exc, limit=DEFAULT_LIMIT):
    """The exception's formatted traceback, redacted and at most about `limit`
    characters; None for an exception that was never raised. A long one keeps its end,
    the innermost frames and the exception itself (where it failed), and says at its
    start how much was cut."""
    tb = getattr(exc, "__traceback__", None)
    if tb is None:
        return None
    try:
        text = "".join(traceback.format_exception(type(exc), exc, tb))
    except Exception:  # an exception whose str() fails, say
        return None
    total = len(text)
    # Redaction runs on a bounded tail; the final cut drops its head, so a secret split
    # by the first cut is dropped with it.
    text = redact_text(text[-4 * limit:])
    if len(text) <= limit:
        return text
    marker = "… [traceback cut from {:,} characters: the outer frames are left out]\n".format(
        total)
    tail = text[-max(0, limit - len(marker)):]
    start = tail.find("\n")
    if 0 <= start < len(tail) // 2:  # begin on a whole line
        tail = tail[start + 1:]
    return marker + tail


def message_preview(exc, limit=DEFAULT_LIMIT):
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable %s>" % type(exc).__name__
    text = redact_text(text[: 4 * limit])
    return text if len(text) <= limit else text[:limit] + "…"
