"""Module-level span constructors for code that does not hold the run (agent libraries):
they hang off `parent=` when given, else the active span, else the most recent run,
else return an inert span."""

from . import decorate
from .run import current_run
from .session import Session
from .span import NoopSpan, with_inputs
from .vocab import check_open_kind


def span(name, kind="custom", *, parent=None, **kw):
    """A span under `parent` (a span, or a carrier from span.context()), else under
    the active span, else a new trace of the current run."""
    if parent is not None:
        if isinstance(parent, dict):
            run = current_run()
            if run is None:
                check_open_kind(kind)
                return NoopSpan(None, kw.get("attributes"), name, kind, None, kw.get("inputs"))
            parent = run.attach_trace_context(parent)
        elif not hasattr(parent, "span") or not hasattr(parent, "trace_id"):
            raise TypeError("parent= takes a span or a carrier from span.context(), got %s"
                            % type(parent).__name__)
        return parent.span(name, kind, **kw)
    run = current_run()
    if run is None:
        check_open_kind(kind)
        return NoopSpan(None, kw.get("attributes"), name, kind, None, kw.get("inputs"))
    return run.span(name, kind, **kw)


def model(name, prompt=None, **kw):
    return span(name, "model", **with_inputs(kw, prompt))


llm = model


def tool(name, inputs=None, **kw):
    return span(name, "tool", inputs=inputs, **kw)


def thought(name="thought", text=None, **kw):
    s = span(name, "thought", **kw)
    if text is not None:
        s.text(text)
    return s


def agent(name, inputs=None, **kw):
    return span(name, "agent", inputs=inputs, **kw)


def iteration(name="iteration", inputs=None, **kw):
    return span(name, "iteration", inputs=inputs, **kw)


def session(name="session", **kw):
    """`with tl.session("chat 42"):` run.session(...) of the current run (inert
    without one)."""
    run = current_run()
    if run is None:
        return Session(None, name, **kw)
    return run.session(name, **kw)


def trace_op(fn=None, **options):
    """Like `run.trace_op`, with the run looked up at each call."""
    return decorate.trace_op(current_run, fn, **options)
