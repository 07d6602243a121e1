"""Span events written as JSON text when they are made, not as dicts encoded later.

Encoding one dict per event with json.dumps was about half of this process's CPU per
span, spent on the sender thread under the same GIL as the training loop. Here ids,
kinds, statuses and integers go into a fixed format as they are (the SDK checked them,
and none needs escaping), names are escaped once and remembered, and only attribute
and body values go through the JSON encoder. The sender then joins the texts.

An open that may still get its input (capture="preview") is queued as a one-item
list, so that `patch` can swap the text while the open waits in the queue."""

import json
from json.encoder import encode_basestring

# The same settings as the request encoder (transport._dumps): NaN is refused.
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode

_OPEN = ('{"op":"open","trace_id":"%s","span_id":"%s","parent_span_id":%s,"name":%s,'
         '"kind":"%s","ts":%d')
_CLOSE = '{"op":"close","trace_id":"%s","span_id":"%s","ts":%d,"status":"%s"'

_MAX_NAMES = 4096  # names a loop makes up (f"step {i}") must not grow this forever
_names = {}


def quoted(name):
    """A span name as a JSON string, remembered: a loop repeats a few names."""
    text = _names.get(name)
    if text is None:
        text = encode_basestring(name)
        if len(_names) < _MAX_NAMES:
            _names[name] = text
    return text


def open_text(span, ts):
    """The open event of `span` at `ts` (microseconds). Raises TypeError or ValueError
    when an attribute or its input has no JSON form."""
    parent = span.parent_span_id
    text = _OPEN % (span.trace_id, span.span_id, "null" if parent is None else
                    '"%s"' % parent, quoted(span.name), span.kind, ts)
    if span.ordinal is not None:
        text += ',"ordinal":%d' % span.ordinal
    if span.step is not None:
        text += ',"step":%d' % span.step
    if span.rank is not None:
        text += ',"rank":%d' % span.rank
    if span.thread_id is not None:
        text += ',"thread_id":' + quoted(span.thread_id)
    if span._attrs:
        text += ',"attributes":' + _dumps(span._attrs)
    if span._input is not None:
        text += ',"input":' + _dumps(span._input)
        if span._cut & 1:  # the preview cut it: the span detail says so
            text += ',"input_truncated":true'
    return text + "}"


def close_text(trace_id, span_id, ts, status, extra):
    """A close event; `extra` holds its optional fields (output, attributes…) in order.
    Raises TypeError or ValueError when one of them has no JSON form."""
    text = _CLOSE % (trace_id, span_id, ts, status)
    for name, value in extra:
        text += ',"%s":%s' % (name, _dumps(value))
    return text + "}"


def with_field(text, name, value):
    """An event's text with one more field (a late input on a waiting open)."""
    return '%s,"%s":%s}' % (text[:-1], name, _dumps(value))


def as_json(item):
    """The JSON text of a queued event (text, patchable text, or a dict as a fallback)
    or of a metric point (a dict)."""
    kind = type(item)
    if kind is str:
        return item
    if kind is list:
        return item[0]
    return _dumps(item)
