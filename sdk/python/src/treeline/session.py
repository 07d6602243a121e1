"""Sessions: the traces (turns) of one multi-turn conversation or episode, summed up
when it ends by a childless root of kind `session` (docs/api.md, section 5).

The summary root is written whole on exit, open and close together, with the
session's start as its start: it has no children, so there is nothing to show while
it runs, and every turn stays a trace of its own."""

import threading
import time

from .context import reset, session_var, step_var
from .errors import InvalidType, InvalidValue
from .ids import coin, new_trace_id
from .roots import Roots
from .span import NoopSpan, Span, either_input, status_for
from .vocab import ROOT_KIND, check_capture, check_non_negative

# On every turn's root: the trace id of its session's summary root.
SESSION_ID_ATTRIBUTE = "treeline.session_id"
# On the summary root: how many turns there were, and how many ended in error.
TURNS_ATTRIBUTE = "treeline.turns"
FAILED_TURNS_ATTRIBUTE = "treeline.failed_turns"


class Session(Roots):
    """`with run.session("chat 42") as s:` (or `tl.session(...)`). Every trace opened
    in the block (run.trace, or a span with no parent) is a turn: its root gets the
    attribute treeline.session_id. On exit the `session` root is written, linked to
    every turn, with treeline.turns and treeline.failed_turns. A session is sampled as
    one: its turns follow its decision."""

    def __init__(self, run, name="session", *, step=None, rank=None, attributes=None,
                 inputs=None, capture=None, metrics=None, input=None):
        if type(name) is not str:
            raise InvalidType("a session name must be a string, got %s" % type(name).__name__)
        if not name:
            raise InvalidValue("a session name must not be empty")
        inputs = either_input(inputs, input)
        check_capture(capture)
        step = check_non_negative(step, "step")
        rank = check_non_negative(rank, "rank")
        if step is None:
            step = step_var.get()
        self.run = run
        self.name = name
        self.session_id = new_trace_id()
        self._turns = []
        self._start_us = None
        self._token = None
        recording = (run is not None and run.tracing
                     and (run.sample_rate >= 1.0 or coin() < run.sample_rate))
        if recording:
            self._root = Span(run, self.session_id, None, name, "session", step,
                              run.rank if rank is None else rank,
                              threading.current_thread().name, capture or run.capture,
                              attributes, inputs, metrics, None)
        else:
            self._root = NoopSpan(run, None, name, "session")
            if inputs is not None:
                self._root.set_input(inputs)

    @property
    def is_recording(self):
        return self._root.is_recording

    @property
    def turns(self):
        """The root spans of the turns opened so far."""
        return list(self._turns)

    def trace(self, name, kind=ROOT_KIND, **kw):
        """A turn: run.trace(...) with this session active."""
        if self.run is None:
            return NoopSpan(None).span(name, kind, **kw)
        token = session_var.set(self)
        try:
            return self.run.trace(name, kind, **kw)
        finally:
            session_var.reset(token)

    turn = trace

    # The summary root's own record: bodies once each, attributes, metrics, tokens.
    def set_input(self, value):
        self._root.set_input(value)
        return self

    def set_output(self, value):
        self._root.set_output(value)
        return self

    input = set_input
    output = set_output

    def set_attribute(self, name, value):
        self._root.set_attribute(name, value)
        return self

    def set_attributes(self, attributes):
        self._root.set_attributes(attributes)
        return self

    def log_metric(self, key, value):
        self._root.log_metric(key, value)
        return self

    @property
    def token_count(self):
        return self._root.token_count

    @token_count.setter
    def token_count(self, n):
        self._root.token_count = n

    def __enter__(self):
        if self._start_us is not None:
            raise InvalidValue("session %r was already entered; a session is entered once"
                               % self.name)
        self._start_us = time.time_ns() // 1000
        self._token = session_var.set(self)
        return self

    def __exit__(self, et, exc, tb):
        reset(session_var, self._token, None)
        root = self._root
        if not root.is_recording:
            return False
        try:
            self._write(root, et, exc)
        except Exception:  # tracing must not replace the user's exception
            from .delivery import warn_limited
            warn_limited("internal", "could not write session %r", self.name)
        return False

    def _write(self, root, et, exc):
        run = self.run
        if not run._admit():
            return
        failed = sum(1 for t in self._turns if t._status == "error")
        root.set_attribute(TURNS_ATTRIBUTE, len(self._turns))
        root.set_attribute(FAILED_TURNS_ATTRIBUTE, failed)
        for turn in self._turns:
            root.add_link(turn)
        if et is not None:
            root.record_exception(exc)
        # Started and closed at once, never made current: nothing nests under it.
        root.start(_ts=self._start_us)
        root._close(status_for(et) if et is not None else (root._status or "ok"))

    def __repr__(self):
        return "<treeline.Session %r %s turns=%d>" % (self.name, self.session_id,
                                                    len(self._turns))
