"""What is ambient: the current span, the step block and the attribute blocks.

Context variables give each thread and each asyncio task its own view, so concurrent
rollouts nest their spans correctly without passing parents around."""

import contextvars

from .attrs import check_attributes, process_note
from .vocab import check_non_negative

current_span_var = contextvars.ContextVar("treeline_current_span", default=None)
step_var = contextvars.ContextVar("treeline_step", default=None)
attributes_var = contextvars.ContextVar("treeline_attributes", default=None)
session_var = contextvars.ContextVar("treeline_session", default=None)


def current_span():
    """The span whose block encloses this code in this thread or task, or None."""
    return current_span_var.get()


def current_step():
    return step_var.get()


def current_attributes():
    """The merged attributes of the enclosing `attributes(...)` blocks."""
    return dict(attributes_var.get() or {})


class _Block:
    __slots__ = ("_var", "_value", "_token")

    def __init__(self, var, value):
        self._var, self._value, self._token = var, value, None

    def __enter__(self):
        self._token = self._var.set(self._value)
        return self._value

    def __exit__(self, *exc):
        reset(self._var, self._token, None)
        return False


def step(n):
    """`with tl.step(n):` gives spans and metric points inside it step n by default."""
    return _Block(step_var, check_non_negative(n, "step"))


def attributes(values):
    """`with tl.attributes({...}):` adds these to every span opened inside the block.
    Inner blocks win over outer ones, and a span's own attributes win over both."""
    merged = dict(attributes_var.get() or {})
    merged.update(check_attributes(values, _note()) or {})
    return _Block(attributes_var, merged)


def _note():
    # The block belongs to no run yet: its changes are counted on the current one.
    from .run import current_run
    run = current_run()
    return run._note if run is not None else process_note


def reset(var, token, fallback):
    # A token from another context (a span left in a different task) cannot be reset;
    # restore the fallback rather than raise into user code.
    try:
        var.reset(token)
    except (ValueError, RuntimeError):
        var.set(fallback)
