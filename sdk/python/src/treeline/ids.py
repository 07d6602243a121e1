"""Identifiers and the sampling coin, from a generator of our own.

Training scripts seed the global `random` module for reproducibility; ids drawn from it
would repeat across runs. Our generator is seeded from the OS and reseeded in forked
children so workers never reuse their parent's ids."""

import os
import random
import re
from time import time_ns as _time_ns

from .errors import InvalidValue

_rng = random.Random(os.urandom(16))
_bits = _rng.getrandbits
coin = _rng.random

_MS_MASK = (1 << 48) - 1

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def _reseed():
    _rng.seed(os.urandom(16))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed)


def new_trace_id():
    """32 hex digits: the time in milliseconds (12 digits), then 80 random bits.

    The server keys a run's traces and spans by trace id. Random ids put each new trace
    at a random place in those indexes, so every commit rewrites pages all over them;
    ids that rise with time append at the end. The random tail keeps ids unique across
    processes, and it is the W3C trace context's random part."""
    return "%012x%020x" % (_time_ns() // 1_000_000 & _MS_MASK, _bits(80))


def new_span_id():
    return "%016x" % _bits(64)


def new_run_id():
    return "%016x" % _bits(64)


def new_key():
    return "%032x" % _bits(128)


def check_id(value, field):
    if type(value) is str and _ID.match(value) and not (field == "trace_id" and value == "steps"):
        return value
    raise InvalidValue(
        "%s %r must be 1-64 characters of letters, digits, '.', '_' or '-', "
        "starting with a letter or digit" % (field, value)
    )
