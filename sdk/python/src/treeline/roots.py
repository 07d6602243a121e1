"""What opens a new trace, under the second call surface's names too: agent_trace and
model_trace are trace() with a kind, and with that kind's word for the input."""

from .span import with_inputs


class Roots:
    """Root constructors, for whatever has a `trace(name, kind, **fields)`: a run, a
    session, the module's stand-in when there is no run."""

    __slots__ = ()

    def agent_trace(self, name, task_input=None, **kw):
        """A trace rooted at an agent: a rollout, any agent invocation. `task_input` is
        its input; trace.final_output(...) records its answer."""
        return self.trace(name, "agent", **with_inputs(kw, task_input, "task_input"))

    def model_trace(self, name, prompt=None, **kw):
        """A trace that is one model call (inference); `prompt` is its input."""
        return self.trace(name, "model", **with_inputs(kw, prompt))
