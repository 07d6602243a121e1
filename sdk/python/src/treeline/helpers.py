"""Module-level span constructors for code that does not hold the run (agent libraries):
they hang off the active span, else the most recent run, else return an inert span."""

from . import decorate
from .run import current_run
from .span import NoopSpan, with_inputs
from .vocab import check_kind


def span(name, kind="custom", **kw):
    run = current_run()
    if run is None:
        check_kind(kind)
        return NoopSpan(None, kw.get("attributes"))
    return run.span(name, kind, **kw)


def model(name, prompt=None, **kw):
    return span(name, "model", **with_inputs(kw, prompt))


llm = model


def tool(name, inputs=None, **kw):
    return span(name, "tool", inputs=inputs, **kw)


def thought(name="thought", text=None, **kw):
    s = span(name, "thought", **kw)
    if text is not None:
        s.set_output(text)
    return s


def agent(name, inputs=None, **kw):
    return span(name, "agent", inputs=inputs, **kw)


def iteration(name="iteration", inputs=None, **kw):
    return span(name, "iteration", inputs=inputs, **kw)


def trace_op(fn=None, **options):
    """Like `run.trace_op`, with the run looked up at each call."""
    return decorate.trace_op(current_run, fn, **options)
