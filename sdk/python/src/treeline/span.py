"""Spans: the recorded kind, the inert kind, and the stand-in for a remote parent."""

import asyncio
import itertools
import math
import threading
import time

from .annotations import put_body
from .attrs import MAX_ATTRIBUTES, attribute_items, check_attributes, is_plain, process_note
from .context import attributes_var, current_span_var, reset, step_var
from .delivery import warn_limited
from .errors import InvalidType, InvalidValue
from .eventtext import close_text, open_text
from .ids import check_id, new_span_id
from .preview import message_preview, sized_preview, traceback_preview
from .vocab import (AGENT_SHAPED, OPEN_KINDS, check_capture, check_non_negative,
                    check_open_kind, check_status)

_now_ns = time.time_ns
_MAX_NAME = 1024
# The root attribute that says how many spans of its trace were dropped (queue full).
DROPPED_SPANS_ATTRIBUTE = "treeline.dropped_spans"


class _Parent:
    """Child constructors and kind-named helpers, shared by everything spans can hang
    off. The second call surface's names (llm_call, tool_call, sub_agent) are the same
    methods under other names."""

    __slots__ = ()

    def span(self, name, kind="custom", *, step=None, rank=None, thread_id=None,
             attributes=None, inputs=None, capture=None, metrics=None, links=None,
             parent_span_id=None, input=None):
        """A child span; its open is queued when its block is entered (or on start()).
        `parent_span_id` hangs it under another span of the same trace instead.
        `input=` is another spelling of `inputs=`."""
        if type(kind) is not str or kind not in OPEN_KINDS:
            kind = check_open_kind(kind)
        if input is not None:
            inputs = either_input(inputs, input)
        run = self.run
        if parent_span_id is not None and parent_span_id != self.span_id:
            return self._other_parent(parent_span_id).span(
                name, kind, step=step, rank=rank, thread_id=thread_id,
                attributes=attributes, inputs=inputs, capture=capture, metrics=metrics,
                links=links)
        sender = run._sender
        if (sender._bytes + sender._inflight >= sender.max_queue_bytes or sender._dropping) \
                and not sender.admit("dropped_spans"):
            run._lost_span(self.trace_id)
            return NoopSpan(run, attributes, name, kind, self.trace_id, inputs)
        if step is None:
            step = step_var.get()
            if step is None:
                step = self.step
        if thread_id is None:
            thread_id = self.thread_id
        elif type(thread_id) is not str:
            raise InvalidType("thread_id must be a string, got %s" % type(thread_id).__name__)
        kids = self._kids  # None under a parent of another process: the server numbers it
        return Span(run, self.trace_id, self.span_id, name, kind, step,
                    self.rank if rank is None else rank, thread_id,
                    capture or self.capture, attributes, inputs, metrics, links,
                    None if kids is None else next(kids))

    def _other_parent(self, parent_span_id):
        check_id(parent_span_id, "parent_span_id")
        live = self.run._live.get(parent_span_id)
        if live is not None and live.trace_id == self.trace_id:
            return live
        # A span of this trace opened elsewhere (another process), or closed already:
        # known by its id only, so its children carry no ordinal.
        return RemoteParent(self.run, self.trace_id, parent_span_id, step=self.step,
                            rank=self.rank, thread_id=self.thread_id, capture=self.capture)

    def child(self, kind, name, **kw):
        """`span.child("tool", "search")`: the same as span(name, kind, ...)."""
        return self.span(name, kind, **kw)

    def model(self, name, prompt=None, **kw):
        """A model call (an LLM or a policy); the prompt is its input."""
        return self.span(name, "model", **with_inputs(kw, prompt))

    llm = llm_call = model

    def tool(self, name, inputs=None, **kw):
        """A tool call; `inputs` are the tool's arguments, set_output its result."""
        return self.span(name, "tool", inputs=inputs, **kw)

    tool_call = tool

    def thought(self, name="thought", text=None, **kw):
        """The agent's reasoning; the text is the span's output."""
        s = self.span(name, "thought", **kw)
        if text is not None:
            s.text(text)
        return s

    def agent(self, name, inputs=None, **kw):
        """A nested agent, with children of its own."""
        return self.span(name, "agent", inputs=inputs, **kw)

    sub_agent = agent

    def iteration(self, name="iteration", inputs=None, **kw):
        """One pass of a perceive-act loop; the trace counts these."""
        return self.span(name, "iteration", inputs=inputs, **kw)

    def artifact(self, name, inputs=None, **kw):
        """Something the agent produced (a file, a patch); point at it in attributes."""
        return self.span(name, "artifact", inputs=inputs, **kw)

    def function(self, name, inputs=None, **kw):
        """A plain function call, its arguments as the input; what trace_op records."""
        return self.span(name, "function", inputs=inputs, **kw)


class _Bodies:
    """The body setters, shared by recorded and inert spans so that a body recorded
    twice, or a kind's setter used on another kind, fails the same way whether the
    span was sampled or not."""

    __slots__ = ()

    def set_input(self, value):
        """The span's input; any time before the close (sent only under preview)."""
        return self._record(1, "input", value, None)

    def set_output(self, value):
        """Sent with the close, and only under capture="preview" (redacted, bounded)."""
        return self._record(2, "output", value, None)

    input = set_input
    output = set_output

    def prompt(self, value):
        """A model span's prompt (its input): a string or a list of chat messages."""
        return self._record(1, "prompt", value, _MODEL)

    def completion(self, value):
        """A model span's completion (its output)."""
        return self._record(2, "completion", value, _MODEL)

    def text(self, value):
        """A thought span's text (its output)."""
        return self._record(2, "text", value, _THOUGHT)

    def task_input(self, value):
        """The task (the input) of an agent-shaped span: agent, iteration, artifact."""
        return self._record(1, "task_input", value, AGENT_SHAPED)

    def final_output(self, value):
        """The final answer (the output) of an agent, iteration or artifact span."""
        return self._record(2, "final_output", value, AGENT_SHAPED)

    def _claim(self, bit, word, kinds):
        if kinds is not None and self.kind is not None and self.kind not in kinds:
            raise InvalidValue("%s() is for %s spans; span %r is a %s span (use %s)"
                               % (word, _one_of(kinds), self.name, self.kind,
                                  "set_input" if bit == 1 else "set_output"))
        if self._bodies & bit:
            which = "input" if bit == 1 else "output"
            raise BodyAlreadyRecorded(
                "span %r (%s%s) already has its %s; %s() would record it a second time. "
                "Record each body once: at creation (inputs=, prompt=, text=) or with "
                "one setter" % (self.name, self.kind,
                                ", " + self.span_id if self.span_id else "", which, word))
        self._bodies |= bit


_MODEL, _THOUGHT = ("model",), ("thought",)  # the kinds a kind-named setter is for


def _one_of(words):
    """("a",) -> "a"; ("a", "b", "c") -> "a, b or c"."""
    return words[0] if len(words) == 1 else "%s or %s" % (", ".join(words[:-1]), words[-1])


class BodyAlreadyRecorded(InvalidValue):
    """A span's input or output was recorded a second time (a ValueError too)."""


class Span(_Parent, _Bodies):
    """A recorded span. Use it as a context manager, or start() it and end() it."""

    __slots__ = ("run", "trace_id", "span_id", "parent_span_id", "name", "kind", "step",
                 "rank", "thread_id", "capture", "ordinal", "_attrs", "_input", "_input_size",
                 "_output", "_output_size", "_error", "_close_attrs", "_metrics", "_links",
                 "_tokens", "_status", "_state", "_token", "_prev", "_bodies", "_open",
                 "_nattrs", "_kids", "_cut", "_notes")

    def __init__(self, run, trace_id, parent_span_id, name, kind, step, rank, thread_id,
                 capture, attributes, inputs, metrics, links, ordinal=0):
        if type(name) is not str:
            raise InvalidType("span name must be a string, got %s" % type(name).__name__)
        if not name:
            raise InvalidValue("span name must not be empty")
        if len(name) > _MAX_NAME:
            name = name[:_MAX_NAME]
        if step is not None and (type(step) is not int or step < 0):
            step = check_non_negative(step, "step")
        if rank is not None and (type(rank) is not int or rank < 0):
            rank = check_non_negative(rank, "rank")
        if capture != "off" and capture != "preview":
            check_capture(capture)
        self.run = run
        self.trace_id = trace_id
        self.span_id = new_span_id()
        self.parent_span_id = parent_span_id
        self.name = name
        self.kind = kind
        self.step = step
        self.rank = rank
        self.thread_id = thread_id
        self.capture = capture
        # Its place among its siblings (0 for a root), and the counter its own children
        # draw theirs from: next() on an itertools.count is atomic under the GIL.
        self.ordinal = ordinal
        self._kids = itertools.count()
        ambient = attributes_var.get()
        if attributes:
            attrs = check_attributes(attributes, run._note) or {}
            if ambient:
                merged = dict(ambient)
                merged.update(attrs)
                attrs = merged
        else:
            attrs = ambient  # shared, never mutated: each block builds a new dict
        if attrs and len(attrs) > MAX_ATTRIBUTES:
            attrs = self._first_attributes(attrs)
        self._attrs = attrs
        self._nattrs = len(attrs) if attrs else 0
        self._input = self._output = self._error = None
        self._input_size = self._output_size = 0
        self._close_attrs = None
        self._metrics = None
        self._links = None
        self._tokens = None
        self._status = None
        self._state = 0  # 0 created, 1 open, 2 closed
        self._token = self._prev = None
        self._open = None  # (open event, queue generation) while the open may be patched
        self._bodies = 0
        self._cut = 0  # 1: the input was cut by the preview, 2: the output
        self._notes = None  # annotations made before the open was queued
        if inputs is not None:
            self._bodies = 1
            if capture == "preview":
                self._input, self._input_size, cut = self._body(inputs, "input", True)
                self._cut = cut
        if metrics:
            if hasattr(metrics, "items"):
                for k, v in metrics.items():
                    self.log_metric(k, v)
            else:
                run._note("dropped_values", "metrics", "span %r: metrics= must be a mapping, "
                          "got %s; ignored", name, type(metrics).__name__)
        if links:
            for link in links:
                self.add_link(link)

    def _first_attributes(self, attrs):
        # The first 256 in the order they were set; the server would keep the first
        # 256 in name order instead, which is not what the caller meant.
        kept = dict(itertools.islice(attrs.items(), MAX_ATTRIBUTES))
        self.run._count("dropped_attributes", len(attrs) - MAX_ATTRIBUTES)
        self.run._sender.say_once("attributes", "span %r: %d attributes past the first %d "
                                  "were dropped", self.name, len(attrs) - MAX_ATTRIBUTES,
                                  MAX_ATTRIBUTES)
        return kept

    # -- lifecycle ----------------------------------------------------------------

    def start(self, _ts=None):
        """Opens the span (queues its open) without making it the current span."""
        if self._state:
            return self
        self._state = 1
        ts = _now_ns() // 1000 if _ts is None else _ts
        run = self.run
        run._live[self.span_id] = self
        try:
            text = open_text(self, ts)
        except (TypeError, ValueError):
            # The sender drops it and says why; a late input then rides the close.
            run._sender.put(self._open_event(ts), 220)
            self._queue_notes()
            return self
        if self.capture == "preview":
            item = [text]  # a late input can still be patched into it
            self._open = (item, run._sender.put(item, len(text)))
        else:
            run._sender.put(text, len(text))
        self._queue_notes()
        return self

    def _queue_notes(self):
        notes, self._notes = self._notes, None
        for body in notes or ():
            self.run._sender.put_annotation(self.trace_id, body)

    def _open_event(self, ts):
        ev = {"op": "open", "trace_id": self.trace_id, "span_id": self.span_id,
              "parent_span_id": self.parent_span_id, "name": self.name, "kind": self.kind,
              "ts": ts}
        for field in ("ordinal", "step", "rank", "thread_id"):
            value = getattr(self, field)
            if value is not None:
                ev[field] = value
        if self._attrs:
            ev["attributes"] = self._attrs
        if self._input is not None:
            ev["input"] = self._input
            if self._cut & 1:
                ev["input_truncated"] = True
        return ev

    def __enter__(self):
        self.start()
        self._prev = current_span_var.get()
        self._token = current_span_var.set(self)
        return self

    def __exit__(self, et, exc, tb):
        if self._token is not None:
            reset(current_span_var, self._token, self._prev)
            self._token = None
        try:
            if et is None:
                self._close(self._status or "ok")
            else:
                self.record_exception(exc)
                self._close(status_for(et))
        except Exception:  # tracing must not replace the user's exception or result
            warn_limited("internal", "could not close span %r", self.name)
        return False

    def end(self, status="ok"):
        """Closes the span with this status (ok, error, cancelled, truncated, interrupted,
        or a tl.Status)."""
        status = check_status(status)
        if self._state == 0:
            self.start()
        self._close(status)

    def _close(self, status):
        if self._state == 2:
            return
        if self._state == 0:
            self.start()
        self._state = 2
        self._status = status
        self._open = None
        run = self.run
        if run._live.pop(self.span_id, None) is None:
            return  # closed already, or opened by the process we were forked from
        extra = []
        if self._output is not None:
            extra.append(("output", self._output))
            if self._cut & 2:
                extra.append(("output_truncated", True))
        if self._input is not None and self._bodies & 4:
            extra.append(("input", self._input))  # recorded after the open had left
            if self._cut & 1:
                extra.append(("input_truncated", True))
        if self._error is not None:
            extra.append(("error", self._error))
        if self.parent_span_id is None and run._trace_drops:
            lost = run._trace_drops.pop(self.trace_id, 0)
            if lost:
                # Bypasses the 256 cap: a trace must never hide that it is incomplete.
                if self._close_attrs is None:
                    self._close_attrs = {}
                self._close_attrs[DROPPED_SPANS_ATTRIBUTE] = lost
        if self._close_attrs:
            extra.append(("attributes", self._close_attrs))
        if self._metrics:
            extra.append(("metrics", self._metrics))
        if self._links:
            extra.append(("links", self._links))
        if self._tokens is not None:
            extra.append(("token_count", self._tokens))
        ts = _now_ns() // 1000
        try:
            item = close_text(self.trace_id, self.span_id, ts, status, extra)
            size = len(item)
        except (TypeError, ValueError):  # the sender drops it and says why
            item = {"op": "close", "trace_id": self.trace_id, "span_id": self.span_id,
                    "ts": ts, "status": status}
            item.update(extra)
            size = 160
        run._sender.put(item, size)

    # -- what a span records ------------------------------------------------------

    @property
    def is_recording(self):
        return True

    def set_status(self, status):
        """The status the block ends with when no exception escapes it."""
        self._status = check_status(status)
        return self

    def _record(self, bit, word, value, kind):
        self._claim(bit, word, kind)
        if self._state == 2:
            warn_limited("late_body", "span %r is closed; its %s was not recorded",
                         self.name, word)
            return self
        if self.capture != "preview":
            return self
        if bit == 2:
            self._output, self._output_size, cut = self._body(value, "output", False)
            if cut:
                self._cut |= 2
            return self
        body, size, cut = self._body(value, "input", self._state == 0)
        self._input, self._input_size = body, size
        if cut:
            self._cut |= 1
        fields = [("input", body), ("input_truncated", True)] if cut else [("input", body)]
        if self._state == 1 and not self.run._sender.patch(self._open, fields, size):
            self._bodies |= 4  # the open has left: the input rides the close
        return self

    def _body(self, value, which, on_open):
        """(body, size, 1 when the preview cut it, else 0)."""
        body, error, size, cut = sized_preview(value, self.run.preview_limit)
        if error is not None:
            message = "%s: %s; sent as its repr" % (which, error)
            if on_open:
                self._attrs = dict(self._attrs or {})
                self._attrs["serialization_error"] = message
            else:
                self.set_attribute("serialization_error", message)
        return body, size, 1 if cut else 0

    def record_exception(self, exc):
        """Records an exception's type; under preview also its redacted message and
        traceback (the innermost frames of about 8 KiB)."""
        if exc is None:
            return self
        error = {"type": type(exc).__name__}
        if self.capture == "preview":
            limit = self.run.preview_limit
            error["message"] = message_preview(exc, limit)
            tb = traceback_preview(exc, limit)
            if tb is not None:
                error["traceback"] = tb
        self._error = error
        return self

    def set_attribute(self, name, value):
        """Never raises: a value the server cannot store as given is flattened, written
        as text, cut or dropped, said once per run and counted (run.counters())."""
        if is_plain(name, value):
            self._set(name, value)
        else:
            for n, v in attribute_items(name, value, self.run._note):
                self._set(n, v)
        return self

    def _set(self, name, value):
        close = self._close_attrs
        if close is None:
            close = self._close_attrs = {}
        elif name in close:
            close[name] = value
            return
        if not (self._attrs and name in self._attrs):  # set on open too: counts once
            if self._nattrs >= MAX_ATTRIBUTES:
                self.run._count("dropped_attributes")
                self.run._sender.say_once("attributes", "span %r: attribute %r dropped; a "
                                          "span keeps its first %d attributes", self.name,
                                          name, MAX_ATTRIBUTES)
                return
            self._nattrs += 1
        close[name] = value

    def set_attributes(self, attributes):
        for name, value in (check_attributes(attributes, self.run._note) or {}).items():
            self._set(name, value)
        return self

    def log_metric(self, key, value):
        """A number about this span (sent with its close); NaN and infinity, and what is
        not a number, are dropped with a warning and counted."""
        value = metric_value(key, value, self.run._note)
        if value is not None:
            if self._metrics is None:
                self._metrics = {}
            self._metrics[key] = value
        return self

    @property
    def token_count(self):
        return self._tokens

    @token_count.setter
    def token_count(self, n):
        self._tokens = check_non_negative(n, "token_count")

    def set_token_count(self, n):
        self.token_count = n
        return self

    def add_link(self, target, span_id=None):
        """Links this span to another: a span, a carrier from context(), or ids."""
        if span_id is None:
            if isinstance(target, dict):
                target, span_id = target.get("trace_id"), target.get("span_id")
            elif hasattr(target, "trace_id"):
                target, span_id = target.trace_id, target.span_id
        if target is None or span_id is None:
            return self  # an inert span has no ids: nothing to link to
        link = {"trace_id": check_id(target, "trace_id"), "span_id": check_id(span_id, "span_id")}
        if self._links is None:
            self._links = []
        self._links.append(link)
        return self

    def annotate(self, name, value, comment=None):
        """Annotates this span: a label, score or verdict (a number, a string or a
        bool) under `name`, with an optional comment, written by code. A second
        annotation of the same name replaces the first. It is sent after the span's
        open has been delivered, so the server always has the span it names. A name,
        value or comment the server would refuse is dropped with a note (counted in
        run.counters()["dropped_values"]), never raised: an annotation must not end a
        training job."""
        try:
            body = put_body(name, value, comment, self.span_id)
        except (ValueError, TypeError) as e:
            self.run._note("dropped_values", "annotation", "span %r: an annotation was "
                           "dropped: %s", self.name, e)
            return self
        if self._state == 0:
            # Not opened yet: it follows the open when start() queues it.
            if self._notes is None:
                self._notes = []
            self._notes.append(body)
        else:
            self.run._sender.put_annotation(self.trace_id, body)
        return self

    def context(self):
        """A carrier that lets another thread or process add spans under this one."""
        return _carrier(self)

    def __repr__(self):
        return "<treeline.Span %s %r kind=%s trace=%s>" % (self.span_id, self.name, self.kind,
                                                          self.trace_id)


class RemoteParent(_Parent):
    """A span opened elsewhere (another process or thread), known from its carrier."""

    __slots__ = ("run", "trace_id", "span_id", "step", "rank", "thread_id", "capture",
                 "_token", "_prev", "_kids")
    is_recording = True

    def __init__(self, run, trace_id, span_id, step=None, rank=None, thread_id=None,
                 capture=None):
        self.run = run
        # The children counter of the span, when it is open in this process (a carrier
        # handed to another thread); else none: the server numbers the children.
        live = run._live.get(span_id)
        self._kids = live._kids if live is not None and live.trace_id == trace_id else None
        self.trace_id = trace_id
        self.span_id = span_id
        self.step = step
        self.rank = rank
        self.thread_id = thread_id
        self.capture = capture or run.capture
        self._token = self._prev = None

    def __enter__(self):
        self._prev = current_span_var.get()
        self._token = current_span_var.set(self)
        return self

    def __exit__(self, *exc):
        reset(current_span_var, self._token, self._prev)
        return False

    def context(self):
        return _carrier(self)


class NoopSpan(_Parent, _Bodies):
    """An inert span with the whole surface. Handed out when tracing is switched off,
    when a root was not sampled, or when the queue is full; everything opened under it
    is inert too, so instrumented code runs unchanged."""

    __slots__ = ("run", "name", "kind", "_lost", "_bodies", "_token", "_prev")
    trace_id = span_id = parent_span_id = step = rank = thread_id = None
    capture = "off"
    is_recording = False

    def __init__(self, run=None, attributes=None, name=None, kind=None, lost=None,
                 inputs=None):
        self.run = run
        self.name = name
        self.kind = kind
        self._lost = lost  # the trace this span was dropped from, for its root's count
        self._bodies = 0 if inputs is None else 1
        self._token = self._prev = None

    def span(self, name, kind="custom", *, attributes=None, parent_span_id=None, **kw):
        kind = check_open_kind(kind)
        if parent_span_id is not None:
            check_id(parent_span_id, "parent_span_id")
        if self._lost is not None:
            self.run._lost_span(self._lost, subtree=True)
        return NoopSpan(self.run, attributes, name, kind, self._lost, input_of(kw))

    def start(self):
        return self

    def __enter__(self):
        self._prev = current_span_var.get()
        self._token = current_span_var.set(self)
        return self

    def __exit__(self, *exc):
        if self._token is not None:
            reset(current_span_var, self._token, self._prev)
            self._token = None
        return False

    def end(self, status="ok"):
        check_status(status)

    def set_status(self, status):
        check_status(status)
        return self

    def _record(self, bit, word, value, kind):
        self._claim(bit, word, kind)
        return self

    def record_exception(self, exc):
        return self

    def set_attribute(self, name, value):
        return self

    def set_attributes(self, attributes):
        return self

    def log_metric(self, key, value):
        return self

    @property
    def token_count(self):
        return None

    @token_count.setter
    def token_count(self, n):
        pass

    def set_token_count(self, n):
        return self

    def add_link(self, target, span_id=None):
        return self

    def annotate(self, name, value, comment=None):
        return self  # nothing is recorded, so nothing is sent

    def context(self):
        return {"treeline": 1, "run_id": getattr(self.run, "run_id", None), "sampled": False}

    def __repr__(self):
        return "<treeline.NoopSpan>"


def _carrier(span):
    return {
        "treeline": 1,
        "run_id": span.run.run_id,
        "project": span.run.project,
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "sampled": True,
        "traceparent": "00-%s-%s-01" % (span.trace_id, span.span_id)
        if len(span.trace_id) == 32 and len(span.span_id) == 16 else None,
        "step": span.step,
        "rank": span.rank,
        "thread_id": span.thread_id,
        "capture": span.capture,
    }


def with_inputs(kw, value, word="prompt"):
    """Lets a kind's own word for its input (prompt=, task_input=) stand in for inputs=."""
    if value is not None:
        if kw.get("inputs") is not None or kw.get("input") is not None:
            raise InvalidType("pass the input once: %s= or inputs=, not both" % word)
        kw["inputs"] = value
    return kw


def either_input(inputs, input):
    """The input given as `inputs=` or as `input=` (the second surface's spelling)."""
    if input is None:
        return inputs
    if inputs is not None:
        raise InvalidType("pass the input once: input= or inputs=, not both")
    return input


def input_of(kw):
    """The input in the keyword arguments of a constructor, under either spelling."""
    return either_input(kw.get("inputs"), kw.get("input"))


def status_for(exc_type):
    if issubclass(exc_type, Exception):
        return "error"
    if issubclass(exc_type, (asyncio.CancelledError, GeneratorExit)):
        return "cancelled"
    return "interrupted"  # KeyboardInterrupt, SystemExit


def metric_value(key, value, note=process_note):
    """The number to send, or None: for NaN and infinity (JSON cannot carry them; a
    diverging loss is data, not a bug), for a value that is not a number, and for a key
    that is not a string of 1-256 characters. Each is dropped with a note (counted in
    dropped_values, said once per run): a metric call must not end a training job."""
    if type(key) is not str or not key or len(key) > 256:
        note("dropped_values", "metric_key", "a metric key must be a string of 1-256 "
             "characters, got %s; its value was dropped", repr(key)[:80])
        return None
    if type(value) is not float:
        if type(value) is int:
            return value
        try:
            if isinstance(value, (str, bytes)) or value is None:
                raise TypeError
            value = float(value)  # bool, numpy scalars, 0-d tensors
        except Exception:
            note("dropped_values", "metric_type", "metric %r is a %s, not a number; dropped",
                 key, type(value).__name__)
            return None
    if not math.isfinite(value):
        note("dropped_values", "metric_nonfinite", "metric %r is %r: JSON has no NaN or "
             "infinity, so it was dropped", key, value)
        return None
    return value


def thread_name():
    return threading.current_thread().name
