"""Treeline: traces and metrics of ML runs, for a self-hosted dashboard.

    import treeline as tl

    run = tl.init("cartpole", name="ppo-seed-42", config={"lr": 3e-4})
    with run.trace("rollout", kind="rollout", step=3) as rollout:
        with rollout.span("policy", kind="model"):
            ...
    run.log_metrics({"train/return": 21.0}, step=3)
    run.finish()

    client = tl.Client()  # reading back: runs, traces, spans, metrics
    low = list(client.traces(run_id=run.run_id, filter="attr.reward < 0.5"))
"""

from .client import ApiError, AuthError, Client, NotFound
from .context import attributes, current_attributes, current_span, step
from .helpers import agent, iteration, llm, model, span, thought, tool, trace_op
from .run import Run, current_run, flush, init
from .span import NoopSpan, RemoteParent, Span
from .transport import Unreachable
from .version import __version__
from .vocab import CAPTURE_MODES, KINDS, SPAN_STATUSES

__all__ = [
    "init", "Run", "Span", "NoopSpan", "RemoteParent", "current_run", "current_span",
    "flush", "step", "attributes", "current_attributes", "span", "model", "llm", "tool",
    "thought", "agent", "iteration", "trace_op", "KINDS", "SPAN_STATUSES",
    "CAPTURE_MODES", "Client", "ApiError", "NotFound", "AuthError", "Unreachable",
    "__version__",
]
