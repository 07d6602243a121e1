"""The fixed vocabularies of the HTTP contract, checked in the caller's code."""

KINDS = (
    "rollout", "env_step", "model", "tool", "retrieval", "reward", "evaluator",
    "dataset", "preprocessing", "postprocessing", "checkpoint", "artifact", "system",
    "custom", "thought", "agent", "iteration", "function", "session",
)
_KIND_SET = frozenset(KINDS)
OPEN_KINDS = _KIND_SET - {"session"}  # what a span may be opened with by hand

SPAN_STATUSES = ("ok", "error", "cancelled", "truncated", "interrupted")
_STATUS_SET = frozenset(SPAN_STATUSES)

RUN_STATUSES = ("finished", "failed")

CAPTURE_MODES = ("off", "preview")


def check_kind(kind):
    if kind in _KIND_SET:
        return kind
    raise ValueError(
        "span kind %r is not valid; valid kinds are: %s (use 'custom' when none fits)"
        % (kind, ", ".join(KINDS))
    )


def check_open_kind(kind):
    """A kind a span may be opened with: any but `session`, whose childless summary
    root only `session()` writes."""
    if kind == "session":
        raise ValueError("kind 'session' is the summary root that treeline.session() "
                         "writes when a session ends; it cannot be opened by hand. Wrap "
                         "the turns in `with tl.session(...)` (or run.session(...))")
    return check_kind(kind)


def check_status(status):
    if status in _STATUS_SET:
        return status
    raise ValueError(
        "span status %r is not valid for closing a span; valid statuses are: %s"
        % (status, ", ".join(SPAN_STATUSES))
    )


def check_run_status(status):
    if status in RUN_STATUSES:
        return status
    raise ValueError(
        "run status %r is not valid; valid statuses are: %s" % (status, ", ".join(RUN_STATUSES))
    )


def check_capture(capture):
    if capture is None or capture in CAPTURE_MODES:
        return capture
    raise ValueError(
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
            raise TypeError("%s must be an integer, got %s" % (field, type(value).__name__)) from None
        if value >= 0:
            return int(value)
    else:
        raise TypeError("%s must be an integer, got bool" % field)
    raise ValueError("%s must be a non-negative integer, got %r" % (field, value))
