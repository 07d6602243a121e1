"""The fixed vocabularies of the HTTP contract, checked in the caller's code, and the
enums that name them (`Kind.MODEL`, `Status.ERROR`), which every call takes beside
the plain strings."""

import enum

from .errors import InvalidType, InvalidValue

KINDS = (
    "rollout", "env_step", "model", "tool", "retrieval", "reward", "evaluator",
    "dataset", "preprocessing", "postprocessing", "checkpoint", "artifact", "system",
    "custom", "thought", "agent", "iteration", "function", "session",
)
_KIND_SET = frozenset(KINDS)
OPEN_KINDS = _KIND_SET - {"session"}  # what a span may be opened with by hand

SPAN_STATUSES = ("ok", "error", "cancelled", "truncated", "interrupted")
_STATUS_SET = frozenset(SPAN_STATUSES)

ROOT_KIND = "agent"  # what run.trace(name) roots at when no kind is given
# The kinds whose input and output are an invocation's task and final answer
# (task_input(), final_output()): an agent, one loop pass, what an agent produced.
AGENT_SHAPED = ("agent", "iteration", "artifact")

RUN_STATUSES = ("finished", "failed")

CAPTURE_MODES = ("off", "preview")


class _Word(str, enum.Enum):
    """A word of a vocabulary that is also the plain string: it compares, hashes,
    prints and encodes to JSON as its value."""

    __str__ = str.__str__
    __format__ = str.__format__


# The kinds under the names of the second call surface too: LLM_CALL is MODEL,
# TOOL_CALL is TOOL, SUB_AGENT is AGENT, SESSION_SUMMARY is SESSION (enum aliases).
Kind = _Word("Kind", [(k.upper(), k) for k in KINDS] + [
    ("LLM_CALL", "model"), ("TOOL_CALL", "tool"), ("SUB_AGENT", "agent"),
    ("SESSION_SUMMARY", "session")], module=__name__)
Kind.__doc__ = "Span kinds, each equal to its string: Kind.MODEL == 'model'."

# Close statuses, and `running`, which the trace lists filter on but no close may use.
Status = _Word("Status", [(w.upper(), w) for w in SPAN_STATUSES + ("running",)],
               module=__name__)
Status.__doc__ = "Span statuses, each equal to its string: Status.ERROR == 'error'."


def plain(word):
    """A vocabulary word as the plain string the wire carries (Kind.MODEL -> "model");
    anything else unchanged, for the check to judge."""
    return word.value if isinstance(word, enum.Enum) else word


def check_kind(kind):
    if type(kind) is not str:
        kind = plain(kind)
    if kind in _KIND_SET and type(kind) is str:
        return kind
    raise InvalidValue(
        "span kind %r is not valid; valid kinds are: %s (use 'custom' when none fits)"
        % (kind, ", ".join(KINDS))
    )


def check_open_kind(kind):
    """A kind a span may be opened with: any but `session`, whose childless summary
    root only `session()` writes."""
    kind = plain(kind)
    if kind == "session":
        raise InvalidValue("kind 'session' is the summary root that treeline.session() "
                           "writes when a session ends; it cannot be opened by hand. Wrap "
                           "the turns in `with tl.session(...)` (or run.session(...))")
    return check_kind(kind)


def check_status(status):
    if type(status) is not str:
        status = plain(status)
    if status in _STATUS_SET and type(status) is str:
        return status
    raise InvalidValue(
        "span status %r is not valid for closing a span; valid statuses are: %s"
        % (status, ", ".join(SPAN_STATUSES))
    )


def check_run_status(status):
    if status in RUN_STATUSES:
        return status
    raise InvalidValue(
        "run status %r is not valid; valid statuses are: %s" % (status, ", ".join(RUN_STATUSES))
    )


def check_capture(capture):
    if capture is None or capture in CAPTURE_MODES:
        return capture
    raise InvalidValue(
        "capture %r is not valid; valid modes are: %s" % (capture, ", ".join(CAPTURE_MODES))
    )


def check_non_negative(value, field):
    """Steps and ranks are non-negative integers (numpy integers accepted)."""
    if value is None:
        return None
    if type(value) is int:
        if value >= 0:
            return value
    elif not isinstance(value, bool):
        try:
            import operator

            value = operator.index(value)
        except TypeError:
            raise InvalidType("%s must be an integer, got %s"
                              % (field, type(value).__name__)) from None
        if value >= 0:
            return int(value)
    else:
        raise InvalidType("%s must be an integer, got bool" % field)
    raise InvalidValue("%s must be a non-negative integer, got %r" % (field, value))
