"""Attribute values as the server can store them.

Nothing here raises: a tracing call must not end a training job over its argument. A
value that cannot be stored as given is flattened (a nested mapping becomes dotted
names), written as text (a list that is not all strings, as JSON; anything else, as
its repr), cut (a string over the server's 64 KiB, with a marker at its end) or
dropped (NaN and infinity, reserved or unusable names). Each change goes to `note`,
which counts it and says it once per run and kind (Run._note)."""

import collections.abc
import json
import math
import reprlib

from .delivery import warn_limited

# A span's own fields; the server drops these as attributes, so they are dropped here.
RESERVED_ATTRIBUTES = frozenset((
    "run_id", "trace_id", "span_id", "parent_span_id", "name", "kind", "status", "step",
    "rank", "thread_id", "token_count", "start_us", "end_us", "duration_us", "input",
    "output", "error", "metrics", "links",
))

MAX_VALUE_BYTES = 64 * 1024  # the server rejects the whole event past this
MAX_ATTRIBUTES = 256  # per span, open and close together
MAX_NAME_BYTES = 256
_MAX_NODES = 4 * MAX_ATTRIBUTES  # per value: a huge or self-containing mapping stops here
_SCALARS = (bool, int, float, str)

_repr = reprlib.Repr()
_repr.maxlevel = 3
_repr.maxstring = _repr.maxother = 1000
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 30


def process_note(counter, kind, message, *args):
    """For values checked where no run is at hand: said once per process, not counted."""
    warn_limited("value:" + kind, message, *args, limit=1)


def check_attributes(attributes, note=process_note):
    """A dict of what can be sent for a mapping of attributes (None when empty)."""
    if attributes is None:
        return None
    if not isinstance(attributes, collections.abc.Mapping) and not hasattr(attributes, "items"):
        note("dropped_attributes", "mapping", "attributes must be a mapping, got %s; ignored",
             type(attributes).__name__)
        return None
    out = {}
    try:
        for name, value in attributes.items():
            if is_plain(name, value):
                out[name] = value
            else:
                out.update(attribute_items(name, value, note))
    except Exception as err:  # a mapping whose items() fails: keep what was read
        note("dropped_attributes", "items", "could not read attributes (%s: %s); kept %d",
             type(err).__name__, err, len(out))
    return out or None


def is_plain(name, value):
    """True for the common case, a short name and a value sent as it is."""
    t = type(value)
    return (type(name) is str and 0 < len(name) <= 64 and name not in RESERVED_ATTRIBUTES
            and (t is int or t is bool or (t is str and len(value) <= MAX_VALUE_BYTES // 4)
                 or (t is float and math.isfinite(value))))


def attribute_items(name, value, note=process_note):
    """The (name, value) pairs to store for one attribute: one; none when it is
    dropped; several for a nested mapping."""
    name = _name(name, note)
    if name is None:
        return []
    out = []
    _add(name, value, note, out, [0])
    return out


def _name(name, note):
    """The name as sent, or None (dropped, with a note)."""
    if type(name) is not str:
        if isinstance(name, str):  # a str subclass (an enum member): its plain text
            name = str(name)
        else:
            note("dropped_attributes", "name_type", "an attribute name must be a string, got "
                 "%s %s; dropped", type(name).__name__, _short_repr(name, 80))
            return None
    if name in RESERVED_ATTRIBUTES:
        note("dropped_attributes", "reserved", "attribute %r is a span field, not an "
             "attribute; dropped (reserved names: %s)", name,
             ", ".join(sorted(RESERVED_ATTRIBUTES)))
        return None
    if len(name) > 64:
        try:
            size = len(name.encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate: no JSON form
            size = -1
        if not 0 < size <= MAX_NAME_BYTES:
            note("dropped_attributes", "name_size", "attribute name %r… is over %d bytes (or "
                 "not valid Unicode); dropped", name[:40], MAX_NAME_BYTES)
            return None
    elif not name:
        note("dropped_attributes", "name_size", "an attribute name must not be empty; dropped")
        return None
    return name


def _add(name, value, note, out, nodes):
    nodes[0] += 1
    if nodes[0] > _MAX_NODES:
        if nodes[0] == _MAX_NODES + 1:
            note("dropped_attributes", "too_many", "attribute %r: a mapping of more than %d "
                 "values; the rest dropped", name.partition(".")[0], _MAX_NODES)
        return
    t = type(value)
    if t is str:
        out.append((name, fit_text(name, value, note)))
    elif t is int or t is bool:
        out.append((name, value))
    elif t is float:
        if math.isfinite(value):
            out.append((name, value))
        else:
            note("dropped_values", "nonfinite", "attribute %r is %r: JSON has no NaN or "
                 "infinity, so it was dropped (a metric, or a string, can say it)", name, value)
    elif isinstance(value, collections.abc.Mapping):
        _flatten(name, value, note, out, nodes)
    elif t is list or t is tuple:
        if all(isinstance(v, str) for v in value):
            out.append((name, _fit_list(name, [str(v) for v in value], note)))
        else:
            note("converted_attributes", "list", "attribute %r is a list that is not all "
                 "strings: stored as its JSON text", name)
            out.append((name, fit_text(name, _json_text(value), note)))
    else:
        plain = _plain(value)
        if plain is not None:
            _add(name, plain, note, out, nodes)
        else:
            note("converted_attributes", "repr", "attribute %r is a %s, which an attribute "
                 "cannot hold (bool, int, float, str, a list of str, or a mapping of these): "
                 "stored as its repr", name, type(value).__name__)
            out.append((name, _short_repr(value, 1000)))


def _flatten(name, mapping, note, out, nodes):
    if nodes[0] == 1:  # said and counted once per value given, not per nested level
        note("converted_attributes", "mapping", "attribute %r is a mapping: stored as dotted "
             "names (%s.KEY, recursively)", name, name)
    try:
        items = list(mapping.items())
    except Exception as err:
        note("dropped_attributes", "items", "attribute %r: could not read the mapping (%s); "
             "dropped", name, type(err).__name__)
        return
    for key, value in items:
        if not isinstance(key, str):
            note("dropped_attributes", "name_type", "attribute %r: a key must be a string, "
                 "got %s %s; dropped", name, type(key).__name__, _short_repr(key, 80))
            continue
        full = _name(name + "." + str(key), note)
        if full is not None:
            _add(full, value, note, out, nodes)


def _plain(value):
    """The plain bool, int, float or str of a subclass (IntEnum, numpy.float64) or of a
    0-d array scalar (numpy, torch), common in training code; None for anything else."""
    try:
        for base in _SCALARS:
            if isinstance(value, base):
                return base(value)
        if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
            item = value.item()
            if type(item) in _SCALARS:
                return item
    except Exception:
        pass
    return None


def cut_marker(length):
    return "… [cut from {:,} characters]".format(length)


def fit_text(name, text, note):
    """The text, or its head with a marker at its end when it is over the server's
    64 KiB (the dashboard shows attributes as they are: the marker is what says so)."""
    if len(text) <= MAX_VALUE_BYTES // 4:
        return text
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_VALUE_BYTES:
        return text
    marker = cut_marker(len(text))
    note("cut_attributes", "cut", "attribute %r is %s characters, over the server's 64 KiB: "
         "cut, with %r at its end", name, "{:,}".format(len(text)), marker)
    keep = MAX_VALUE_BYTES - len(marker.encode("utf-8"))
    return data[:keep].decode("utf-8", "ignore") + marker


def _fit_list(name, items, note):
    total, kept = 0, []
    for item in items:
        total += len(item.encode("utf-8", "surrogatepass"))
        if total > MAX_VALUE_BYTES:
            break
        kept.append(item)
    else:
        return kept
    marker = "… [cut from {:,} items]".format(len(items))
    note("cut_attributes", "cut_list", "attribute %r: a list of %s strings over the server's "
         "64 KiB: cut, with %r as its last item", name, "{:,}".format(len(items)), marker)
    while kept and sum(len(i.encode("utf-8", "surrogatepass")) for i in kept) \
            + len(marker.encode("utf-8")) > MAX_VALUE_BYTES:
        kept.pop()
    kept.append(marker)
    return kept


def _json_text(value):
    try:
        return json.dumps(value, ensure_ascii=False, default=lambda v: _short_repr(v, 1000))
    except Exception:  # a list that holds itself, say
        return _short_repr(value, 1000)


def _short_repr(value, limit):
    try:
        text = _repr.repr(value)
    except Exception as err:
        text = "<%s: repr failed with %s>" % (type(value).__name__, type(err).__name__)
    return text if len(text) <= limit else text[:limit] + "…"
