"""Attribute checks. Wrong types and reserved names are programming errors and raise
where the attribute is set, not later on the background thread."""

import math

# A span's own fields; the server drops these as attributes, so we refuse them early.
RESERVED_ATTRIBUTES = frozenset((
    "run_id", "trace_id", "span_id", "parent_span_id", "name", "kind", "status", "step",
    "rank", "thread_id", "token_count", "start_us", "end_us", "duration_us", "input",
    "output", "error", "metrics", "links",
))

MAX_VALUE_BYTES = 64 * 1024
MAX_ATTRIBUTES = 256  # per span, open and close together
MAX_NAME_BYTES = 256
_SCALARS = (bool, int, float, str)


def check_attribute(name, value):
    """Returns the value to send (long strings cut to the server's limit)."""
    if type(name) is not str:
        raise TypeError("attribute names must be strings, got %s" % type(name).__name__)
    if name in RESERVED_ATTRIBUTES:
        raise ValueError(
            "attribute %r is a span field, not an attribute; reserved names are: %s"
            % (name, ", ".join(sorted(RESERVED_ATTRIBUTES)))
        )
    if not name or len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise ValueError("attribute names must be 1-%d bytes, got %r" % (MAX_NAME_BYTES, name[:40]))
    t = type(value)
    if t is str:
        return _fit(value) if len(value) > MAX_VALUE_BYTES // 4 else value
    if t is int or t is bool:
        return value
    if t is float:
        # JSON has no NaN or infinity; keep the fact readable instead of failing the batch.
        return value if math.isfinite(value) else repr(value)
    if t is list or t is tuple:
        if all(type(v) is str for v in value):
            return _fit_list(list(value))
        raise TypeError("attribute %r: a list value must hold only strings" % name)
    # Subclasses (IntEnum, numpy.float64) and 0-d array scalars (numpy, torch) are
    # common in training code; send their plain value.
    for base in _SCALARS:
        if isinstance(value, base):
            return check_attribute(name, base(value))
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return check_attribute(name, value.item())
    raise TypeError(
        "attribute %r must be a bool, int, float, str or list of str, got %s"
        % (name, type(value).__name__)
    )


def check_attributes(attributes):
    """Checks a mapping and returns a new dict that is safe to send."""
    if not attributes:
        return None
    if not hasattr(attributes, "items"):
        raise TypeError("attributes must be a mapping, got %s" % type(attributes).__name__)
    return {k: check_attribute(k, v) for k, v in attributes.items()}


def _fit(text):
    data = text.encode("utf-8")
    if len(data) <= MAX_VALUE_BYTES:
        return text
    return data[: MAX_VALUE_BYTES - 3].decode("utf-8", "ignore") + "…"


def _fit_list(items):
    total, kept = 0, []
    for item in items:
        size = len(item.encode("utf-8"))
        if total + size > MAX_VALUE_BYTES:
            break
        kept.append(item)
        total += size
    return kept
