"""Treeline: traces and metrics of ML runs, for a self-hosted dashboard.

    import treeline as tl

    run = tl.init("cartpole", name="ppo-seed-42", config={"lr": 3e-4})
    with run.trace("rollout", kind="rollout", step=3) as rollout:
        with rollout.span("policy", kind="model"):
            ...
    with tl.agent_trace("episode", task_input=task) as trace:  # the second surface's names
        with tl.llm_call("policy", prompt=messages) as llm:
            llm.completion(reply)
        trace.final_output(answer)
    run.log_metrics({"train/return": 21.0}, step=3)
    run.finish()

    client = tl.Client()  # reading back: runs, traces, spans, metrics
    low = list(client.traces(run_id=run.run_id, filter="attr.reward < 0.5"))
    client.export_to("run.jsonl", run.run_id)      # every span, as JSON lines
    tl.import_spans("run.jsonl", url="http://elsewhere:3000")  # ... into another server
"""

from .client import ApiError, AuthError, Client, NotFound
from .context import attributes, current_attributes, current_span, step
from .delivery import ON_FULL
from .errors import InvalidType, InvalidValue, TreelineError
from .helpers import (agent, agent_trace, artifact, close, function, iteration, llm, llm_call,
                      model, model_trace, op, session, span, sub_agent, thought, tool,
                      tool_call, trace, trace_op)
from .project import ProjectTracer, tracer
from .run import Run, current_run, flush, init
from .session import Session
from .span import DROPPED_SPANS_ATTRIBUTE, BodyAlreadyRecorded, NoopSpan, RemoteParent, Span
from .transfer import ImportResult, import_spans
from .transport import Unreachable, compression
from .version import __version__
from .vocab import CAPTURE_MODES, KINDS, SPAN_STATUSES, Kind, Status

# The second call surface's names for the enums.
SpanKind, SpanStatus = Kind, Status

__all__ = [
    "init", "Run", "Span", "NoopSpan", "RemoteParent", "Session", "current_run",
    "current_span", "flush", "close", "step", "attributes", "current_attributes", "span",
    "model", "llm", "tool", "thought", "agent", "iteration", "session", "trace_op",
    # the second call surface: the same calls under its names, and its roots
    "trace", "agent_trace", "model_trace", "llm_call", "tool_call", "sub_agent", "artifact",
    "function", "op", "Kind", "Status", "SpanKind", "SpanStatus", "KINDS", "SPAN_STATUSES",
    "CAPTURE_MODES", "ON_FULL", "DROPPED_SPANS_ATTRIBUTE", "TreelineError", "InvalidValue",
    "InvalidType", "BodyAlreadyRecorded", "compression", "Client", "ApiError", "NotFound",
    "AuthError", "Unreachable", "import_spans", "ImportResult", "__version__",
]
