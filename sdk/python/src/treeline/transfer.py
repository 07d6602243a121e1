"""Importing spans: the JSON lines of an export (`Client.export`, `Client.export_to`,
`GET /api/runs/{run_id}/export`) written into a server, the same or another.

    import treeline as tl

    tl.Client("http://old:3000").export_to("run.jsonl", "ppo-seed-42")
    result = tl.import_spans("run.jsonl", url="http://new:3000")
    print(result.summary())

Each line is one span (format "treeline.span.v1", docs/api.md). Its run is created
once (`PUT /api/runs/{run_id}` with the line's project), then the span is written as
the two events an SDK would have sent: an open (with every attribute) and, unless the
span is still running, a close. Events go in batches of at most 1000 events and
4 MiB of JSON. Importing the same lines twice stores nothing twice: the server
ignores an open or a close it already has, with a warning."""

import collections
import json
import os
import time

from .client import ApiError, _error_for
from .errors import InvalidType
from .ids import check_id, new_key
from .config import resolve
from .transport import Transport, Unreachable, _dumps, compress, pick_encoding

FORMAT = "treeline.span.v1"
# An annotation's line, after its trace's spans; written once every span is in.
NOTE_FORMAT = "treeline.annotation.v1"
# Fields a line must hold (not null) to be imported.
REQUIRED = ("run_id", "project", "trace_id", "span_id", "name", "kind", "start_us")
MAX_BATCH_EVENTS = 1000
MAX_BATCH_BYTES = 4 << 20  # JSON bytes before compression
MAX_RETRIES = 3  # further attempts after a 503 or 429, or a connection failure
MAX_RETRY_WAIT = 30
_WARNING_EXAMPLES = 20

_OPEN_FIELDS = ("parent_span_id", "ordinal", "step", "rank", "thread_id", "input")
_CLOSE_FIELDS = ("output", "error", "token_count")


class Problem(collections.namedtuple("Problem", "line message")):
    """A line that was skipped, or an event of it the server rejected: the line's
    number (1-based; for an iterable of dicts, the item's) and what was wrong."""

    __slots__ = ()

    def __str__(self):
        return "line %d: %s" % (self.line, self.message)


class ImportResult:
    """What `import_spans` did.

    spans     spans whose open the server accepted
    lines     lines read (blank lines are not counted)
    skipped   lines not imported: not JSON, not an object, a required field missing,
              an invalid run_id, another format
    rejected  events the server rejected (each one is also a problem)
    warnings  events the server stored with a warning, or ignored because it had them
              already (a repeated import); `warning_examples` holds the first 20
    notes     annotations written (their author is the importing key)
    runs      the run ids written to, in the order they were first seen
    problems  a Problem(line, message) per skipped line and per rejected event"""

    def __init__(self):
        self.spans = 0
        self.notes = 0
        self.lines = 0
        self.skipped = 0
        self.rejected = 0
        self.warnings = 0
        self.runs = []
        self.problems = []
        self.warning_examples = []

    @property
    def ok(self):
        """True when every line was imported and no event was rejected."""
        return not self.problems

    def as_dict(self):
        return {"spans": self.spans, "notes": self.notes, "lines": self.lines, "skipped": self.skipped,
                "rejected": self.rejected, "warnings": self.warnings,
                "runs": list(self.runs),
                "problems": [{"line": p.line, "message": p.message} for p in self.problems]}

    def summary(self):
        """One line: "imported 12 spans into run r1; 1 line skipped, 0 events rejected,
        0 warnings"."""
        runs = ", ".join(self.runs) or "no run"
        notes = " and %d annotation%s" % (self.notes, _s(self.notes)) if self.notes else ""
        return "imported %d span%s%s into run%s %s; %d line%s skipped, %d event%s rejected, " \
               "%d warning%s" % (self.spans, _s(self.spans), notes, _s(len(self.runs)), runs,
                                 self.skipped, _s(self.skipped), self.rejected,
                                 _s(self.rejected), self.warnings, _s(self.warnings))

    def __repr__(self):
        return "<treeline.ImportResult %s>" % self.summary()


def _s(n):
    return "" if n == 1 else "s"


def import_spans(source, url=None, api_key=None, run_id=None, *, timeout=30.0):
    """Imports exported spans into the server at `url` (default TREELINE_URL, else
    http://127.0.0.1:3000), with `api_key` (default TREELINE_API_KEY; it needs the
    write scope). Returns an ImportResult.

    source: a path to a JSON-lines file, a file object open for reading (text or
    binary), or an iterable of dicts (such as `Client.export(...)`, which streams one
    server's spans into another) or of JSON strings. run_id: import every span into
    this run instead of the run each line names.

    A line that is not JSON, or lacks a required field (run_id, project, trace_id,
    span_id, name, kind, start_us), is skipped and reported in `problems` with its
    line number; the import goes on. So are the lines of a run that exists in another
    project on that server (the problem names the run). A request the server refuses
    as a whole raises ApiError (AuthError for a missing or read-only key), and a
    server that cannot be reached
    raises Unreachable; what was sent before stays, and running the import again is
    harmless."""
    if run_id is not None:
        check_id(run_id, "run_id")
    url, api_key = resolve(url, api_key)
    importer = _Importer(Transport(url, api_key, timeout), run_id)
    for number, record in _records(source):
        importer.line(number, record)
    importer.finish()
    return importer.result


def _records(source):
    """(line number, dict | Problem message string) for each non-blank line."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            yield from _parsed(f)
    elif hasattr(source, "read"):
        yield from _parsed(source)
    elif isinstance(source, (dict, bytes, bytearray)):
        raise InvalidType("source must be a path, a file object or an iterable of dicts, "
                          "got %s" % type(source).__name__)
    else:
        for number, item in enumerate(source, 1):
            if isinstance(item, dict):
                yield number, item
            elif isinstance(item, (str, bytes, bytearray)):
                if item.strip():
                    yield number, _parse(item)
            else:
                yield number, "not a JSON object (%s)" % type(item).__name__


def _parsed(lines):
    for number, raw in enumerate(lines, 1):
        if raw.strip():
            yield number, _parse(raw)


def _parse(raw):
    try:
        value = json.loads(raw)
    except ValueError as err:
        return "not valid JSON (%s)" % err
    if not isinstance(value, dict):
        return "not a JSON object"
    return value


class _Importer:
    def __init__(self, transport, run_id):
        self.transport = transport
        self.run_id = run_id
        self.encoding = pick_encoding("auto")
        self.result = ImportResult()
        self.created = set()
        # run id -> why the server would not create it; its lines are skipped
        self.refused = {}
        # run id -> [events (JSON bytes), (line, op) per event, JSON size]
        self.batches = {}
        # (line, run id, annotation line), written after every span
        self.notes = []

    # -- lines ------------------------------------------------------------------------

    def line(self, number, record):
        result = self.result
        result.lines += 1
        if not isinstance(record, dict):
            return self.skip(number, record)
        fmt = record.get("format")
        if fmt == NOTE_FORMAT:
            return self.note(number, record)
        if fmt is not None and fmt != FORMAT:
            return self.skip(number, "format %r is not %s" % (fmt, FORMAT))
        missing = [f for f in REQUIRED if record.get(f) is None]
        if missing:
            return self.skip(number, "%s %s missing" % (", ".join(missing),
                                                        "is" if len(missing) == 1 else "are"))
        run = self.run_id or record["run_id"]
        try:
            check_id(run, "run_id")
        except ValueError as err:
            return self.skip(number, str(err))
        if type(record["project"]) is not str:
            return self.skip(number, "project must be a string, got %r" % (record["project"],))
        open_ev, close_ev = _events(record)
        try:
            events = [_dumps(open_ev).encode()]
            if close_ev is not None:
                events.append(_dumps(close_ev).encode())
        except (TypeError, ValueError) as err:  # NaN or infinity in a body, say
            return self.skip(number, "cannot be sent as JSON: %s" % err)
        if run in self.refused:
            return self.skip(number, self.refused[run])
        if run not in self.created and not self.create_run(run, record["project"]):
            return self.skip(number, self.refused[run])
        batch = self.batches.get(run)
        if batch is None:
            batch = self.batches[run] = [[], [], 0]
        size = sum(len(e) + 1 for e in events)
        if batch[0] and (len(batch[0]) + len(events) > MAX_BATCH_EVENTS
                         or batch[2] + size > MAX_BATCH_BYTES):
            self.send(run, batch[0], batch[1])
            batch[0], batch[1], batch[2] = [], [], 0
        batch[0].extend(events)
        batch[1].append((number, "open"))
        if close_ev is not None:
            batch[1].append((number, "close"))
        batch[2] += size

    def note(self, number, record):
        """Keeps an annotation line for `finish`, when its target is on the server."""
        missing = [f for f in ("run_id", "trace_id", "name") if not isinstance(record.get(f), str)]
        if missing or "value" not in record:
            return self.skip(number, "annotation: %s missing" % ", ".join(missing or ["value"]))
        run = self.run_id or record["run_id"]
        self.notes.append((number, run, record))

    def skip(self, number, message):
        self.result.skipped += 1
        self.result.problems.append(Problem(number, message + "; skipped"))

    def finish(self):
        for run, (events, meta, _) in self.batches.items():
            if events:
                self.send(run, events, meta)
        self.batches.clear()
        for number, run, record in self.notes:
            if run not in self.created:
                self.skip(number, "annotation of run %s, whose spans were not imported" % run)
                continue
            body = {k: record.get(k) for k in ("span_id", "name", "value", "comment", "source")}
            path = "/api/runs/%s/traces/%s/annotations" % (run, record["trace_id"])
            status, payload = self.request("PUT", path, _dumps(body).encode(), None, new_key())
            if 200 <= status < 300:
                self.result.notes += 1
            elif status in (400, 404):
                err = payload.get("error") if isinstance(payload, dict) else None
                err = err if isinstance(err, dict) else {}
                self.skip(number, "annotation refused: %s: %s" % (err.get("code"), err.get("message")))
            else:
                raise _refused(status, payload, "PUT " + path)
        self.notes = []

    # -- requests ---------------------------------------------------------------------

    def create_run(self, run, project):
        path = "/api/runs/" + run
        status, payload = self.request("PUT", path, _dumps({"project": project}).encode(), None)
        if status == 409:
            # Another project's run of that id: its lines are skipped, the rest go on.
            err = payload.get("error") if isinstance(payload, dict) else None
            err = err if isinstance(err, dict) else {}
            self.refused[run] = ("run %s exists in another project than %r (%s); import it "
                                 "under another run id (run_id=)"
                                 % (run, project, err.get("message")
                                    or "the server refused to create it"))
            return False
        if not 200 <= status < 300:
            raise _refused(status, payload, "PUT " + path)
        self.created.add(run)
        self.result.runs.append(run)
        return True

    def send(self, run, events, meta):
        raw = b'{"events":[' + b",".join(events) + b"]}"
        body, encoding = compress(raw, self.encoding)
        path = "/api/runs/%s/traces/events" % run
        status, payload = self.request("POST", path, body, encoding, new_key())
        if status == 413 and len(events) > 1:  # past the server's size limits: halve
            half = len(events) // 2
            self.send(run, events[:half], meta[:half])
            self.send(run, events[half:], meta[half:])
            return
        if status == 413:
            line, op = meta[0]
            self.result.rejected += 1
            self.result.problems.append(Problem(line, "the server refused its %s event as too "
                                                "large (413)" % op))
            return
        if not 200 <= status < 300:
            raise _refused(status, payload, "POST " + path)
        payload = payload if isinstance(payload, dict) else {}
        rejected = {}
        for item in payload.get("rejected") or ():
            if isinstance(item, dict) and isinstance(item.get("index"), int):
                rejected[item["index"]] = item
        result = self.result
        for index, (line, op) in enumerate(meta):
            item = rejected.get(index)
            if item is not None:
                result.rejected += 1
                result.problems.append(Problem(line, "the server rejected its %s event: %s: %s"
                                               % (op, item.get("code"), item.get("message"))))
            elif op == "open":
                result.spans += 1
        for item in payload.get("warnings") or ():
            result.warnings += 1
            if len(result.warning_examples) < _WARNING_EXAMPLES:
                index = item.get("index") if isinstance(item, dict) else None
                message = item.get("message") if isinstance(item, dict) else str(item)
                line = meta[index][0] if isinstance(index, int) and 0 <= index < len(meta) \
                    else 0
                result.warning_examples.append(Problem(line, str(message)))

    def request(self, method, path, body, encoding, key=None):
        """(status, parsed answer), after retrying 503 and 429 (after their Retry-After,
        at most 30 s) and connection failures, up to 3 times."""
        for attempt in range(MAX_RETRIES + 1):
            try:
                status, payload = self.transport.send(method, path, body, encoding, key)
            except Unreachable:
                if attempt == MAX_RETRIES:
                    raise
                time.sleep(min(MAX_RETRY_WAIT, 2 ** attempt))
                continue
            if status in (429, 503) and attempt < MAX_RETRIES:
                wait = self.transport.retry_after
                time.sleep(min(MAX_RETRY_WAIT, 1 if wait is None else wait))
                continue
            return status, payload
        return status, payload


def _refused(status, payload, what):
    """The ApiError (NotFound, AuthError) for a request refused as a whole."""
    err = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(err, dict):
        err = {}
    return _error_for(status, err.get("code"),
                      "%s: %s" % (what, err.get("message") or "HTTP %d" % status))


def _events(record):
    """The open and close events (the close None for a running span) of one line."""
    start = record["start_us"]
    open_ev = {"op": "open", "trace_id": record["trace_id"], "span_id": record["span_id"],
               "name": record["name"], "kind": record["kind"], "ts": start}
    for field in _OPEN_FIELDS:
        value = record.get(field)
        if value is not None:
            open_ev[field] = value
    attributes = record.get("attributes")
    if attributes:
        open_ev["attributes"] = attributes
    status = record.get("status")
    if status is None or status == "running":
        return open_ev, None
    end = record.get("end_us")
    close_ev = {"op": "close", "trace_id": record["trace_id"], "span_id": record["span_id"],
                "ts": start if end is None else end, "status": status}
    for field in _CLOSE_FIELDS:
        value = record.get(field)
        if value is not None:
            close_ev[field] = value
    for field in ("metrics", "links"):
        value = record.get(field)
        if value:
            close_ev[field] = value
    return open_ev, close_ev
