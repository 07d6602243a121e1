"""Module-level constructors for code that does not hold the run (agent libraries).
Spans hang off `parent=` when given, else the active span, else the most recent run,
else are inert; roots belong to the most recent run, else are inert. Each is the
method of the same name on that parent (one implementation), and the second call
surface's names (llm_call, tool_call, sub_agent, agent_trace, ...) are aliases."""

from . import decorate
from .errors import InvalidType
from .roots import Roots
from .run import current_run
from .session import Session
from .span import NoopSpan
from .vocab import ROOT_KIND


class _NoRun(Roots):
    """Stands in for the run when none was initialized: its traces are inert."""

    __slots__ = ()

    def trace(self, name, kind=ROOT_KIND, **kw):
        return NoopSpan(None).span(name, kind, **kw)


def _parent(parent):
    """What a module-level span hangs off: `parent` (a span, or a carrier from
    span.context()), else the current run (whose span() nests under the active span),
    else an inert span."""
    if parent is None:
        run = current_run()
        return run if run is not None else NoopSpan(None)
    if isinstance(parent, dict):
        run = current_run()
        return run.attach_trace_context(parent) if run is not None else NoopSpan(None)
    if not hasattr(parent, "span") or not hasattr(parent, "trace_id"):
        raise InvalidType("parent= takes a span or a carrier from span.context(), got %s"
                          % type(parent).__name__)
    return parent


def _run():
    run = current_run()
    return run if run is not None else _NoRun()


def span(name, kind="custom", *, parent=None, **kw):
    """A span under `parent`, else under the active span, else a new trace of the
    current run."""
    return _parent(parent).span(name, kind, **kw)


def model(name, prompt=None, *, parent=None, **kw):
    return _parent(parent).model(name, prompt, **kw)


llm = llm_call = model


def tool(name, inputs=None, *, parent=None, **kw):
    return _parent(parent).tool(name, inputs, **kw)


tool_call = tool


def thought(name="thought", text=None, *, parent=None, **kw):
    return _parent(parent).thought(name, text, **kw)


def agent(name, inputs=None, *, parent=None, **kw):
    return _parent(parent).agent(name, inputs, **kw)


sub_agent = agent


def iteration(name="iteration", inputs=None, *, parent=None, **kw):
    return _parent(parent).iteration(name, inputs, **kw)


def artifact(name, inputs=None, *, parent=None, **kw):
    return _parent(parent).artifact(name, inputs, **kw)


def function(name, inputs=None, *, parent=None, **kw):
    return _parent(parent).function(name, inputs, **kw)


def trace(name, kind=ROOT_KIND, **kw):
    """A new trace of the current run (run.trace), of kind `agent` unless told."""
    return _run().trace(name, kind, **kw)


def agent_trace(name, task_input=None, **kw):
    """A new trace rooted at an agent (run.agent_trace); task_input is its input."""
    return _run().agent_trace(name, task_input, **kw)


def model_trace(name, prompt=None, **kw):
    """A new trace that is one model call (run.model_trace); prompt is its input."""
    return _run().model_trace(name, prompt, **kw)


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


op = trace_op


def close(timeout=30.0):
    """Finishes the current run (run.finish()); True when there is none."""
    run = current_run()
    return True if run is None else run.finish(timeout=timeout)
