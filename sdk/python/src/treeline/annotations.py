"""Annotations: a label, a score or a verdict about a trace or a span (docs/api.md 6.5).

The server's rules are checked here, where the annotation is made, so that a mistake
raises at the call that made it: one found by the server would surface, for a span's
annotation sent in the background, only as a line in the log."""

import math
import unicodedata

from .errors import InvalidType, InvalidValue
from .ids import check_id

MAX_NAME_BYTES = 128
MAX_TEXT_BYTES = 1024
MAX_COMMENT_CHARS = 4000
# Besides whitespace and control characters: what the filter grammar reads as the end
# of a field name (wire/src/annotations.rs, check_name).
_NOT_IN_NAMES = frozenset("=!<>\"'(),")


def check_name(name):
    if type(name) is not str:
        raise InvalidType("annotation name must be a string, got %s" % type(name).__name__)
    size = len(name.encode("utf-8", "surrogatepass"))
    if not 1 <= size <= MAX_NAME_BYTES:
        raise InvalidValue("annotation name must be 1-%d bytes, got %d" % (MAX_NAME_BYTES, size))
    for c in name:
        if c.isspace() or c in _NOT_IN_NAMES or unicodedata.category(c) in ("Cc", "Cs"):
            raise InvalidValue("annotation name %r must have no spaces, quotes, brackets, "
                               "commas or operators (= ! < >): it is one field of a filter"
                               % (name,))
    return name


def check_value(value, name):
    """The value as JSON will carry it: a bool, a finite number or a short string."""
    value = _plain(value)
    if type(value) is bool or type(value) is int:
        if type(value) is int and not _fits_double(value):
            raise InvalidValue("annotation %s: value must be a finite number; this integer "
                               "is too large for one" % name)
        return value
    if type(value) is float:
        if not math.isfinite(value):
            raise InvalidValue("annotation %s: value must be a finite number, got %r"
                               % (name, value))
        return value
    if type(value) is str:
        size = _utf8_size(value, "value", name)
        if size > MAX_TEXT_BYTES:
            raise InvalidValue("annotation %s: value is a string of %d bytes; at most %d"
                               % (name, size, MAX_TEXT_BYTES))
        if "\0" in value:
            raise InvalidValue("annotation %s: value must not contain NUL" % name)
        return value
    raise InvalidType("annotation %s: value must be a number, a string or a boolean, got %s"
                      % (name, type(value).__name__))


def check_comment(comment, name):
    """The comment to send, or None (an empty one is none, as for the server)."""
    if comment is None:
        return None
    if type(comment) is not str:
        raise InvalidType("annotation %s: comment must be a string, got %s"
                          % (name, type(comment).__name__))
    if len(comment) > MAX_COMMENT_CHARS:
        raise InvalidValue("annotation %s: comment is %d characters; at most %d"
                           % (name, len(comment), MAX_COMMENT_CHARS))
    if "\0" in comment:
        raise InvalidValue("annotation %s: comment must not contain NUL" % name)
    _utf8_size(comment, "comment", name)
    return comment or None


SOURCES = ("code", "person")


def put_body(name, value, comment=None, span_id=None, source="code"):
    """The checked body of PUT …/annotations: written by code unless `source` says a
    person made it (a labelling notebook, say)."""
    name = check_name(name)
    if source not in SOURCES:
        raise InvalidValue("annotation %s: source must be \"code\" or \"person\", got %r"
                           % (name, source))
    body = {"name": name, "value": check_value(value, name), "source": source}
    comment = check_comment(comment, name)
    if comment is not None:
        body["comment"] = comment
    if span_id is not None:
        body["span_id"] = check_id(span_id, "span_id")
    return body


def _plain(value):
    # numpy scalars and 0-d tensors: what a reward or a score often is in a training loop.
    if type(value) in (bool, int, float, str):
        return value
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (bytes, dict, list, tuple)):
        try:
            plain = item()
        except Exception:
            return value
        if type(plain) in (bool, int, float, str):
            return plain
    return value


def _fits_double(n):
    try:
        return math.isfinite(float(n))
    except OverflowError:
        return False


def _utf8_size(text, field, name):
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidValue("annotation %s: %s is not valid text (a lone surrogate)"
                           % (name, field)) from None
