"""Runs: what `treeline.init` returns, and the process-wide exit handling."""

import atexit
import dataclasses
import json
import logging
import math
import multiprocessing.util
import os
import sys
import threading
import time

from . import decorate, redact
from .config import DEFAULT_URL, resolve
from .context import current_span_var, session_var, step_var
from .delivery import COUNTERS, ON_FULL, Sender
from .errors import InvalidType, InvalidValue
from .ids import check_id, coin, new_run_id, new_trace_id
from .links import say_page
from .preview import DEFAULT_LIMIT
from .roots import Roots
from .session import SESSION_ID_ATTRIBUTE, Session
from .span import NoopSpan, RemoteParent, Span, _Parent, either_input, input_of, metric_value
from .spool import Spool
from .transport import Transport, pick_encoding
from .vocab import (OPEN_KINDS, ROOT_KIND, check_capture, check_non_negative,
                    check_open_kind, check_run_status)

log = logging.getLogger("treeline")

_TRUE = ("1", "true", "yes", "on")

_runs = []  # every run of this process, for the exit handler
_default = [None]  # the most recent run, for the module-level helpers
_state = {"hooks": False, "uncaught": False}


def _env_flag(name):
    return os.environ.get(name, "").strip().lower() in _TRUE


def _env_rate():
    text = os.environ.get("TREELINE_SAMPLE_RATE", "").strip()
    try:
        rate = float(text) if text else 1.0
        if 0.0 <= rate <= 1.0:
            return rate
    except ValueError:
        pass
    log.warning("treeline: ignoring TREELINE_SAMPLE_RATE=%r (want a number from 0 to 1)", text)
    return 1.0


def default_spool_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "treeline", "spool")


class Run(_Parent, Roots):
    """One training run: its metrics and its traces. Create it with `treeline.init`."""

    def __init__(self, project, name=None, config=None, *, url=None, api_key=None,
                 run_id=None, capture="off", sample_rate=None, rank=None,
                 preview_limit=DEFAULT_LIMIT, finish_on_exit=None, disabled=None,
                 spool_dir=None, compression="auto", timeout=10.0, flush_interval=1.0,
                 batch_bytes=512 * 1024, max_queue_bytes=64 << 20, max_retries=4,
                 on_full="block", block_timeout=10.0, max_inflight=4, tracing=None,
                 quiet=None, transport=None):
        if type(project) is not str or not 1 <= len(project) <= 128 or any(
                ord(c) < 32 or ord(c) == 127 for c in project):
            raise InvalidValue("project must be 1-128 characters with no control characters")
        if name is not None and type(name) is not str:
            raise InvalidType("name must be a string")
        if on_full not in ON_FULL:
            raise InvalidValue("on_full %r is not valid; valid values are: %s"
                               % (on_full, ", ".join(ON_FULL)))
        self.project = project
        self.name = name
        self.run_id = check_id(run_id, "run_id") if run_id is not None else new_run_id()
        self.capture = check_capture(capture) or "off"
        if sample_rate is None:
            sample_rate = _env_rate()
        if not 0.0 <= float(sample_rate) <= 1.0:
            raise InvalidValue("sample_rate must be between 0 and 1, got %r" % (sample_rate,))
        self.sample_rate = float(sample_rate)
        if rank is None and os.environ.get("RANK", "").isdigit():
            rank = int(os.environ["RANK"])  # torch.distributed's launcher sets it
        self.rank = check_non_negative(rank, "rank")
        self.step = None  # roots take their step from the call or a step block
        self.preview_limit = int(preview_limit)
        self.trace_id = self.span_id = self.thread_id = None
        # TREELINE_OFF (disabled=True) switches everything off; TREELINE_DISABLED
        # (tracing=False) only the traces, so a run traced off for speed keeps its curves.
        self._inert = _env_flag("TREELINE_OFF") if disabled is None else bool(disabled)
        if tracing is None:
            tracing = not _env_flag("TREELINE_DISABLED")
        self.tracing = bool(tracing) and not self._inert
        # TREELINE_QUIET (quiet=True): no line with the run's dashboard page.
        self.quiet = _env_flag("TREELINE_QUIET") if quiet is None else bool(quiet)
        self._live = {}
        self._trace_drops = {}  # trace id -> spans of it dropped, for its root's close
        self._reported = None
        self._finished = False
        self._next_step = 0
        # Passing run_id joins a run another process may own: do not finish it at exit.
        self.finish_on_exit = (run_id is None) if finish_on_exit is None else finish_on_exit
        if self._inert:  # nothing will be sent: the URL and key are not used, nor checked
            self.url = (url or os.environ.get("TREELINE_URL") or DEFAULT_URL).rstrip("/")
            self._sender = None
            return
        # A URL or key that cannot work raises here, at setup, rather than losing the
        # run's data on the sender thread later.
        self.url, api_key = resolve(url, api_key)
        redact.add_known_secret(api_key)
        spool_dir = spool_dir or os.environ.get("TREELINE_SPOOL_DIR") or default_spool_dir()
        self.spool_dir = os.path.join(spool_dir, self.run_id)
        self._sender = Sender(
            transport or Transport(self.url, api_key, timeout),
            Spool(self.spool_dir, url=self.url), run_id=self.run_id,
            encoding=pick_encoding(compression), batch_bytes=batch_bytes,
            max_queue_bytes=max_queue_bytes, flush_interval=flush_interval,
            max_retries=max_retries, on_full=on_full, block_timeout=block_timeout,
            max_inflight=max_inflight)
        body = {"project": project, "start_us": time.time_ns() // 1000}
        if name is not None:
            body["name"] = name
        if config is not None:
            body["config"] = _jsonable(redact.redact_config(_as_dict(config)))
        self._sender.put_request("PUT", "/api/runs/" + self.run_id, body, "run")
        _register(self)
        say_page(self, "started" if run_id is None else "joined")

    # -- spans ----------------------------------------------------------------------

    def trace(self, name, kind=ROOT_KIND, *, step=None, rank=None, thread_id=None,
              attributes=None, inputs=None, capture=None, metrics=None, links=None,
              input=None):
        """A root span: a new trace, of kind `agent` unless told. Sampling is decided
        here, once per root (inside a session, once per session). `input=` is another
        spelling of `inputs=`."""
        if type(kind) is not str or kind not in OPEN_KINDS:
            kind = check_open_kind(kind)
        if input is not None:
            inputs = either_input(inputs, input)
        session = session_var.get()
        if session is not None and session.run is self:
            if not session.is_recording:
                return NoopSpan(self, attributes, name, kind, None, inputs)
            attributes = dict(attributes) if attributes else {}
            attributes[SESSION_ID_ATTRIBUTE] = session.session_id
        elif not self.tracing or (self.sample_rate < 1.0 and coin() >= self.sample_rate):
            return NoopSpan(self, attributes, name, kind, None, inputs)
        sender = self._sender
        if (sender._bytes + sender._inflight >= sender.max_queue_bytes or sender._dropping) \
                and not sender.admit("dropped_spans"):
            return NoopSpan(self, attributes, name, kind, None, inputs)
        if step is None:
            step = step_var.get()
        if thread_id is None:
            thread_id = threading.current_thread().name
        elif type(thread_id) is not str:
            raise InvalidType("thread_id must be a string, got %s" % type(thread_id).__name__)
        root = Span(self, new_trace_id(), None, name, kind, step,
                    self.rank if rank is None else rank, thread_id[:256],
                    capture or self.capture, attributes, inputs, metrics, links)
        if session is not None and session.run is self:
            session._turns.append(root)
        return root

    def span(self, name, kind="custom", *, parent_span_id=None, trace_id=None, **kw):
        """A child of `parent_span_id` (a span of this process, or with trace_id= one
        opened elsewhere), else of this run's active span in this thread or task, else
        a root. Takes the fields of trace()."""
        if parent_span_id is None:
            if trace_id is not None:
                raise InvalidValue("trace_id= names the trace of parent_span_id=; without a "
                                   "parent, a span opens a new trace")
            parent = self._current()
            if parent is not None:
                return parent.span(name, kind, **kw)
            return self.trace(name, kind, **kw)
        kind = check_open_kind(kind)
        check_id(parent_span_id, "parent_span_id")
        if not self.tracing:
            return NoopSpan(self, kw.get("attributes"), name, kind, None, input_of(kw))
        parent = self._live.get(parent_span_id)
        if parent is None:
            current = self._current()
            if trace_id is None and current is not None:
                trace_id = current.trace_id
            if trace_id is None:
                raise InvalidValue("parent_span_id %r is not an open span of this process; pass "
                                   "trace_id= too (or use a carrier)" % parent_span_id)
            parent = RemoteParent(self, check_id(trace_id, "trace_id"), parent_span_id,
                                  rank=self.rank, thread_id=threading.current_thread().name)
        return parent.span(name, kind, **kw)

    def start_span(self, name, kind="custom", *, parent_span_id=None, trace_id=None, **kw):
        """span(...), already opened, for manual lifecycles: call .end(status) on it."""
        return self.span(name, kind, parent_span_id=parent_span_id, trace_id=trace_id,
                         **kw).start()

    def session(self, name="session", *, step=None, rank=None, attributes=None,
                inputs=None, capture=None, metrics=None, input=None):
        """`with run.session("chat 42") as s:` every trace opened in the block is a turn
        of the session; on exit, the childless `session` summary root is written."""
        return Session(self, name, step=step, rank=rank, attributes=attributes,
                       inputs=either_input(inputs, input), capture=capture, metrics=metrics)

    def trace_op(self, fn=None, **options):
        """`@run.trace_op` or `@run.trace_op(name=, kind="function", step=, rank=,
        attributes=, metrics=, capture=)`: one span per call of a sync or async function."""
        if not self.tracing:
            decorate.trace_op(lambda: None, None, **options)  # still check the options
            return fn if fn is not None else (lambda f: f)
        return decorate.trace_op(lambda: self, fn, **options)

    op = trace_op

    def attach_trace_context(self, carrier):
        """`with run.attach_trace_context(carrier) as parent:` spans opened in the block
        (or on `parent`) join the trace the carrier came from."""
        if not isinstance(carrier, dict):
            raise InvalidType("a trace carrier is the dict from span.context()")
        if not self.tracing:
            return NoopSpan(self)
        run_id = carrier.get("run_id")
        if run_id != self.run_id:
            raise InvalidValue("this carrier belongs to run %r, not to run %r; carriers are "
                               "run-scoped" % (run_id, self.run_id))
        if not carrier.get("sampled", True):
            return NoopSpan(self)
        step, rank = carrier.get("step"), carrier.get("rank")
        return RemoteParent(
            self, check_id(carrier.get("trace_id"), "trace_id"),
            check_id(carrier.get("span_id"), "span_id"),
            step=check_non_negative(step, "step"), rank=check_non_negative(rank, "rank"),
            thread_id=carrier.get("thread_id"), capture=check_capture(carrier.get("capture")))

    def _current(self):
        current = current_span_var.get()
        if current is not None and current.run is self:
            return current
        return None

    def _admit(self):
        return self._sender.admit("dropped_spans")

    def _lost_span(self, trace_id, subtree=False):
        """A span of this trace was dropped: its root's close will say how many."""
        if subtree:
            self._sender.counters["dropped_spans"] += 1
        if trace_id is None:
            return
        drops = self._trace_drops
        if len(drops) > 100000 and trace_id not in drops:
            drops.clear()  # roots that never closed here; keep memory bounded
        drops[trace_id] = drops.get(trace_id, 0) + 1

    def _count(self, name, n=1):
        if self._sender is not None:
            self._sender.counters[name] += n

    def _note(self, counter, kind, message, *args):
        """A value stored otherwise than given, or dropped: counted, and said once per
        run and kind of change."""
        if self._sender is not None:
            self._sender.counters[counter] += 1
            self._sender.say_once("value:" + kind, message + " (said once per run; "
                                  "run.counters()[%r] counts them)", *args, counter)

    # -- metrics and lifecycle ----------------------------------------------------------

    def log_metrics(self, metrics, step=None):
        """Logs numbers at a step: the given one, else the enclosing step block's, else
        one past the last step logged. NaN and infinity are skipped with a warning."""
        if self._inert:
            return
        if step is None:
            step = step_var.get()
            if step is None:
                step = self._next_step
        elif type(step) is not int or step < 0:
            step = check_non_negative(step, "step")
        self._next_step = step + 1
        ts = time.time_ns() // 1000
        points = []
        if not hasattr(metrics, "items"):
            self._note("dropped_values", "metrics", "log_metrics takes a mapping of metric "
                       "names to numbers, got %s; ignored", type(metrics).__name__)
            return
        for key, value in metrics.items():
            value = metric_value(key, value, self._note)
            if value is not None:
                points.append({"key": key, "step": step, "value": value, "ts": ts})
        if points:
            self._sender.put_points(points, 96 * len(points))

    def flush(self, timeout=30.0):
        """Waits until everything logged so far was sent (or spooled, if the server is
        unreachable) and one replay of the spool was tried. True when nothing is left
        waiting on disk."""
        if self._inert:
            return True
        return self._sender.flush(timeout)

    def finish(self, status="finished", timeout=30.0):
        """Closes spans still open as interrupted, marks the run finished (or failed)
        and flushes. Spans logged afterwards are still sent."""
        check_run_status(status)
        if self._inert or self._finished:
            return True
        self._finished = True
        self._close_live("interrupted")
        self._sender.put_request("POST", "/api/runs/%s/finish" % self.run_id,
                                 {"status": status, "end_us": time.time_ns() // 1000}, "finish")
        ok = self._sender.close(timeout)
        self._report_losses()
        say_page(self, status)
        return ok

    @property
    def dropped(self):
        """Spans and metric points dropped because the queue was full."""
        return self._sender.dropped if self._sender else 0

    def counters(self):
        """What was lost, changed or held up, as a dict: dropped_spans, dropped_points
        (queue full), dropped_attributes (past 256 on a span, or a name that cannot be
        used), dropped_values (NaN, infinity and what is not a number, in attributes and
        metrics), converted_attributes (stored as dotted names, JSON text or repr),
        cut_attributes (strings over 64 KiB), blocked_seconds and block_timeouts
        (on_full="block"), rejected (events and points the server refused),
        refused_requests, server_warnings, sender_dropped (lost to a fault of the
        sender); and the spool's spool_dropped and set_aside."""
        if self._sender is None:
            out = dict.fromkeys(COUNTERS, 0)
            out.update(spool_dropped=0, set_aside=0)
            return out
        out = dict(self._sender.counters)
        out["spool_dropped"] = self._sender.spool.dropped
        out["set_aside"] = self._sender.spool.set_aside
        return out

    def _report_losses(self):
        c = self.counters()
        if self._sender.refused:  # refused requests were kept, not lost: said apart
            c["refused_requests"] = 0
        lost = ["%d %s" % (c[k], k.replace("_", " ")) for k in
                ("dropped_spans", "dropped_points", "dropped_attributes", "dropped_values",
                 "rejected", "refused_requests", "spool_dropped", "sender_dropped") if c[k]]
        if lost and lost != self._reported:
            self._reported = lost
            log.warning("treeline: run %s lost data: %s (run.counters() has the details)",
                        self.run_id, ", ".join(lost))

    def _close_live(self, status):
        for span in reversed(list(self._live.values())):  # children before parents
            try:
                span._close(status)
            except Exception:
                pass

    def _on_exit(self):
        if self._inert:
            return
        self._close_live("interrupted")
        status = None  # set when this exit finishes the run
        if self.finish_on_exit and not self._finished:
            self._finished = True
            status = "failed" if _state["uncaught"] else "finished"
            self._sender.put_request("POST", "/api/runs/%s/finish" % self.run_id,
                                     {"status": status, "end_us": time.time_ns() // 1000},
                                     "finish")
        timeout = float(os.environ.get("TREELINE_EXIT_TIMEOUT", "15") or 15)
        start = time.monotonic()
        delivered = self._sender.flush(timeout)
        if not delivered and time.monotonic() - start >= timeout * 0.95:
            self._sender.hurry_up()  # out of patience: whatever is left goes to disk
            delivered = self._sender.flush(5.0)
        self._report_losses()
        if not delivered and self._sender.refused:
            log.warning("treeline: run %s: the server refused this run's key (HTTP %d); its "
                        "data waits in %s: send it with a write key: TREELINE_API_KEY=<a write "
                        "key> treeline-sync %s", self.run_id, self._sender.refused[0],
                        self.spool_dir, self.spool_dir)
        elif not delivered:
            log.warning("treeline: run %s: some data could not be sent and waits in %s; "
                        "send it later with: treeline-sync %s", self.run_id, self.spool_dir,
                        self.spool_dir)
        if status is not None:
            say_page(self, status)

    def __enter__(self):
        return self

    def __exit__(self, et, exc, tb):
        failed = et is not None and (issubclass(et, Exception) or et is KeyboardInterrupt)
        self.finish("failed" if failed else "finished")
        return False

    def __repr__(self):
        return "<treeline.Run %s project=%r%s>" % (
            self.run_id, self.project, " disabled" if self._inert else
            " tracing off" if not self.tracing else "")


def init(project, name=None, config=None, *, url=None, api_key=None, run_id=None, **options):
    """Starts (or, with run_id, joins) a run. TREELINE_URL and TREELINE_API_KEY come
    from the environment when not given; TREELINE_DISABLED=1 switches tracing off
    (metrics still flow) and TREELINE_OFF=1 switches everything off.
    Never contacts the server in this call: the run is created by the background sender.
    Logs the run's dashboard page (logger treeline.link), here and when the run
    finishes, unless quiet=True or TREELINE_QUIET=1.
    Raises tl.InvalidValue (a ValueError), saying what to write instead, for a URL or
    key that cannot work: the one mistake the SDK raises for outside the API's own misuse."""
    run = Run(project, name, config, url=url, api_key=api_key, run_id=run_id, **options)
    _default[0] = run
    return run


def current_run():
    """The run of the active span, else the most recently initialized run, else None."""
    current = current_span_var.get()
    if current is not None and current.run is not None:
        return current.run
    return _default[0]


def flush(timeout=30.0):
    return all([run.flush(timeout) for run in list(_runs)])


# -- process-wide hooks ------------------------------------------------------------------

def _register(run):
    _runs.append(run)
    multiprocessing.util.register_after_fork(run, _after_multiprocessing_fork)
    if _state["hooks"]:
        return
    _state["hooks"] = True
    atexit.register(_at_exit)
    previous = sys.excepthook

    def hook(et, exc, tb):
        _state["uncaught"] = True
        previous(et, exc, tb)

    sys.excepthook = hook


def _at_exit():
    for run in list(_runs):
        try:
            run._on_exit()
        except Exception:
            log.exception("treeline: error while flushing at exit")


def _after_fork_in_child():
    # Spans open in the parent belong to it; the child must not close them.
    _state["mp_final"] = False  # multiprocessing clears its finalizers in the child
    for run in _runs:
        run._live.clear()
        run.finish_on_exit = False


def _after_multiprocessing_fork(run):
    # multiprocessing's forked workers leave through os._exit, skipping atexit; its own
    # finalizers do run, so flush from one of them.
    if not _state.get("mp_final"):
        _state["mp_final"] = True
        multiprocessing.util.Finalize(None, _at_exit, exitpriority=10)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _as_dict(config):
    if isinstance(config, dict):
        return config
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    if hasattr(config, "__dict__"):  # argparse.Namespace and plain objects
        return dict(vars(config))
    return dict(config)


def _jsonable(value, depth=0):
    """Run configs are sent whole: keep what JSON can carry and stringify the rest."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth > 20:
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v, depth + 1) for v in value]
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return repr(value)
