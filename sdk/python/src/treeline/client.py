"""Reading data back: a client for the server's query API (docs/api.md, section 8).

    import treeline as tl

    client = tl.Client()  # TREELINE_URL, TREELINE_API_KEY
    for t in client.traces(run_id="ppo-seed-42", filter=["attr.reward < 0.5", "error_count > 0"],
                           sort="attr.reward", order="asc"):
        print(t["trace_id"], t["attributes"].get("reward"), t["error_count"])

Lists are generators that fetch the next page only when the one before is used up,
so a caller that stops early sends no further requests. `export` streams a run's
spans, one dict per span, in the JSON-lines format that `treeline.import_spans` reads
back into another server. The one thing it writes is annotations (`annotate`,
`delete_annotation`), which need a write key."""

import gzip
import http.client
import io
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib

from . import redact
from .annotations import check_name, put_body
from .config import resolve
from .errors import InvalidType, InvalidValue, TreelineError
from .ids import check_id, new_key
from .transport import USER_AGENT, Unreachable, make_opener, retry_after
from .vocab import plain

MAX_RETRIES = 3  # further attempts after a 503 (and, for a write, a network error)
MAX_RETRY_WAIT = 30  # seconds: the most a Retry-After is honoured for
DEFAULT_RETRY_WAIT = 1  # seconds, after a 503 that names no wait


class ApiError(TreelineError):
    """The server answered with an error: `status` (the HTTP status), `code` (the
    snake_case word of the answer's {"error": {"code", "message"}}, or None when the
    answer was not of that shape) and `message`."""

    def __init__(self, status, code, message):
        self.status = status
        self.code = code
        self.message = message
        super().__init__(status, code, message)

    def __str__(self):
        return "HTTP %s %s: %s" % (self.status, self.code or "(no code)", self.message)


class NotFound(ApiError):
    """404: the run, trace or span (or the path) does not exist, or the key does not
    see it."""


class AuthError(ApiError):
    """401 or 403: no key, a key the server does not accept, or a key without access."""


def _error_for(status, code, message):
    if status == 404:
        return NotFound(status, code, message)
    if status in (401, 403):
        return AuthError(status, code, message)
    return ApiError(status, code, message)


def _seg(value, what):
    """One path segment, percent-encoded."""
    if type(value) is not str or not value:
        raise InvalidType("%s must be a non-empty string, got %r" % (what, value))
    return urllib.parse.quote(value, safe="")


def _page_size(value, what="page_size"):
    if type(value) is not int or value < 1:
        raise InvalidValue("%s must be a positive integer, got %r" % (what, value))
    return value


def _int_param(value, what):
    if value is not None and type(value) is not int:
        raise InvalidType("%s must be an integer, got %r" % (what, value))
    return value


def _str_param(value, what):
    if value is not None and type(value) is not str:
        raise InvalidType("%s must be a string, got %r" % (what, value))
    return value


def _pair(value, what):
    """A (trace_id, span_id) pair as the API's TRACE:SPAN."""
    if not (isinstance(value, (tuple, list)) and len(value) == 2
            and all(isinstance(v, str) and v for v in value)):
        raise InvalidType("%s must be a (trace_id, span_id) pair of strings, got %r"
                          % (what, value))
    return "%s:%s" % tuple(value)


def _csv(value, what):
    """A string, or a list of strings joined with commas (tl.Kind and tl.Status members
    count as their strings)."""
    if value is None or type(value) is str:
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        words = [plain(v) for v in value]
        if all(type(v) is str for v in words):
            return ",".join(words)
    elif type(plain(value)) is str:
        return plain(value)
    raise InvalidType("%s must be a string or a list of strings, got %r" % (what, value))


def _filters(value):
    if value is None:
        return []
    if type(value) is str:
        return [value]
    if isinstance(value, (list, tuple)) and all(type(v) is str for v in value):
        return list(value)
    raise InvalidType("filter must be a string or a list of strings, got %r" % (value,))


class Client:
    """Reads runs, traces, spans and metrics from a Treeline server.

    url and api_key default to TREELINE_URL and TREELINE_API_KEY, as for `treeline.init`
    (the URL falls back to http://127.0.0.1:3000), and are checked as there: ValueError
    for one that cannot work. The key is sent as
    `Authorization: Bearer <key>`; any scope may read.

    Errors: an error answer raises `ApiError` (`NotFound` for 404, `AuthError` for 401
    and 403), carrying the answer's status, code and message. A server that cannot be
    reached raises `Unreachable`. A 503 (the server is busy) is retried up to 3 times,
    after the Retry-After it names (at most 30 s; 1 s when it names none), before
    `ApiError` is raised; no 4xx is ever retried. A write (an annotation) is also
    retried after a network error (1, 2, then 4 s later), under one Idempotency-Key
    per call, so that a retry of a write the server did store is answered with the
    first answer instead of writing again."""

    def __init__(self, url=None, api_key=None, timeout=30.0):
        # A URL or key that cannot work raises ValueError here, saying what to write.
        self.url, self.api_key = resolve(url, api_key)
        redact.add_known_secret(self.api_key)
        self.timeout = timeout
        self._opener = make_opener(self.url)
        self._sleep = time.sleep  # tests replace it

    def __repr__(self):
        return "Client(%r)" % (self.url,)

    # -- runs and projects ---------------------------------------------------------

    def projects(self):
        """Every project with at least one run (`name`, `runs`, `traces`,
        `updated_us`), most recently updated first."""
        return self._get("/api/projects")["projects"]

    def runs(self, project=None, q=None, page_size=500):
        """Yields run summaries, newest first: of one project, and/or those whose name
        or id contains `q` (case-insensitive)."""
        params = [("project", _str_param(project, "project")), ("q", _str_param(q, "q")),
                  ("limit", _page_size(page_size))]
        return self._pages("/api/runs", params, "runs")

    def run(self, run_id):
        """One run: its summary plus `config` and `metric_keys`."""
        return self._get("/api/runs/" + _seg(run_id, "run_id"))

    def metrics(self, run_id, key, max_points=None):
        """One metric series: {"key", "points": [[step, value], ...], "downsampled"}.
        An unknown key gives an empty series."""
        if type(key) is not str or not key:
            raise InvalidType("key must be a non-empty string, got %r" % (key,))
        params = [("key", key),
                  ("max_points", _int_param(max_points, "max_points"))]
        return self._get("/api/runs/%s/metrics" % _seg(run_id, "run_id"), params)

    # -- traces --------------------------------------------------------------------

    def traces(self, run_id=None, project=None, filter=None, sort=None, order=None,
               status=None, kind=None, q=None, min_step=None, max_step=None,
               page_size=500, *, since_us=None, until_us=None):
        """Yields trace summaries, of one run (the fast path) or across runs.

        filter: one test or a list of them, all of which a trace must pass, such as
        "attr.reward < 0.5" or "error_count > 0" (at most 8). sort: updated, duration,
        spans, tokens, errors, iterations, attr.NAME or note.NAME; order: asc or desc (default desc).
        status, kind: a string or a list of strings. Without a run and without
        since_us/until_us, the server lists only recent traces (its browsing window,
        7 days by default)."""
        params = [("project", _str_param(project, "project"))]
        params += [("filter", f) for f in _filters(filter)]
        params += [("sort", _str_param(sort, "sort")), ("order", _str_param(order, "order")),
                   ("status", _csv(status, "status")), ("kind", _csv(kind, "kind")),
                   ("q", _str_param(q, "q")),
                   ("min_step", _int_param(min_step, "min_step")),
                   ("max_step", _int_param(max_step, "max_step")),
                   ("since_us", _int_param(since_us, "since_us")),
                   ("until_us", _int_param(until_us, "until_us")),
                   ("limit", _page_size(page_size))]
        if run_id is None:
            return self._pages("/api/traces", params, "traces")
        return self._pages("/api/runs/%s/traces" % _seg(run_id, "run_id"), params, "traces")

    def trace(self, run_id, trace_id):
        """One trace summary."""
        return self._get("/api/runs/%s/traces/%s" % (_seg(run_id, "run_id"),
                                                     _seg(trace_id, "trace_id")))

    def attribute_keys(self, run_id):
        """The root-attribute keys of a run's traces, with their types and ranges or
        common values: what `attr.NAME` filters and sorts can use."""
        return self._get("/api/runs/%s/traces/attributes" % _seg(run_id, "run_id"))["attributes"]

    # -- spans ---------------------------------------------------------------------

    def spans(self, run_id, trace_id, parent=None, page_size=1000, *, name=None,
              start=None, around=None):
        """Yields one level of a trace's span tree, in sibling order, without bodies:
        the children of span `parent`, or without it the trace's roots (and orphans).

        name: only the children whose name contains it (case ignored). start: begin at
        the child in this place, counted from 0; around: begin up to half a page before
        this child's id. Give at most one of start and around; either way the level is
        then followed to its end."""
        if start is not None and around is not None:
            raise InvalidType("give start or around, not both")
        if start is not None and (type(start) is not int or start < 0):
            raise InvalidType("start must be a non-negative integer, got %r" % (start,))
        params = [("parent_span_id", _str_param(parent, "parent")),
                  ("name", _str_param(name, "name")),
                  ("limit", _page_size(page_size))]
        first = [("from", start), ("around", _str_param(around, "around"))]
        return self._pages("/api/runs/%s/traces/%s/spans" % (
            _seg(run_id, "run_id"), _seg(trace_id, "trace_id")), params, "spans", first)

    def span(self, run_id, trace_id, span_id):
        """One span with everything: attributes, metrics, links, input, output, error
        and the `path` of its ancestors."""
        return self._get("/api/runs/%s/traces/%s/spans/%s" % (
            _seg(run_id, "run_id"), _seg(trace_id, "trace_id"), _seg(span_id, "span_id")))

    # -- comparing -----------------------------------------------------------------

    def align(self, run_id, a, b, threshold=None):
        """The children of spans `a` and `b` of a run, lined up (docs/api.md 8.13): `a`
        and `b` are (trace_id, span_id) pairs. Returns {"rows": [{"a", "b", "change",
        "differences"}], "truncated"}; `change` is "same", "changed", "only_a" or
        "only_b". Call it again on a pair's span ids for the next level."""
        params = [("a", _pair(a, "a")), ("b", _pair(b, "b"))]
        if threshold is not None:
            if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
                raise InvalidType("threshold must be a number, got %r" % (threshold,))
            params.append(("threshold", repr(float(threshold))))
        return self._get("/api/runs/%s/align" % _seg(run_id, "run_id"), params)

    def diff(self, run_id, a, b):
        """Two spans' attributes and bodies compared (docs/api.md 8.15): `a` and `b`
        are (trace_id, span_id) pairs. Returns {"attributes": [{"path", "a", "b"}],
        "bodies": [{"body", "same", "mode", "text", "changes", "cut"}]}."""
        params = [("a", _pair(a, "a")), ("b", _pair(b, "b"))]
        return self._get("/api/runs/%s/diff" % _seg(run_id, "run_id"), params)

    def rollouts(self, run_id, trace_id):
        """The traces of the run that share this trace's rollout id, by step: a list
        of trace summaries (empty when the trace has no rollout id)."""
        return self._get("/api/runs/%s/traces/%s/rollouts" % (
            _seg(run_id, "run_id"), _seg(trace_id, "trace_id")))["traces"]

    # -- annotations ---------------------------------------------------------------

    def annotations(self, run_id, trace_id, span_id=None):
        """The annotations of a trace and its spans (or of one span), a list of dicts:
        `trace_id`, `span_id` (None for the trace's own), `name`, `value`, `kind`,
        `comment`, `author` ({"key_id", "name"}), `source` ("person" or "code"),
        `created_us`, `updated_us`. The trace's own come first."""
        params = [("span_id", None if span_id is None else check_id(span_id, "span_id"))]
        return self._get(self._annotations_path(run_id, trace_id), params)["annotations"]

    def annotate(self, run_id, trace_id, span_id=None, *, name, value, comment=None,
                 source="code"):
        """Annotates a trace (or, with span_id, one of its spans): a number, a string or
        a bool under `name`, with an optional comment. `source` is "code" (a judge, a
        grader) or "person" (a labelling notebook, where a person chose the value). An
        annotation of the same name by the same key is updated in place. Returns it as
        stored. Needs a write key; a name, value, comment or source the server would
        refuse raises ValueError (TypeError for one of the wrong type) before anything
        is sent."""
        path = self._annotations_path(run_id, trace_id)
        return self._write("PUT", path, put_body(name, value, comment, span_id, source))

    def delete_annotation(self, run_id, trace_id, name, span_id=None):
        """Deletes this key's annotation `name` of the trace (or of span_id). True when
        there was one; another key's annotation of that name stays."""
        body = {"name": check_name(name)}
        if span_id is not None:
            body["span_id"] = check_id(span_id, "span_id")
        path = self._annotations_path(run_id, trace_id)
        return bool(self._write("DELETE", path, body).get("deleted"))

    @staticmethod
    def _annotations_path(run_id, trace_id):
        return "/api/runs/%s/traces/%s/annotations" % (_seg(run_id, "run_id"),
                                                       _seg(trace_id, "trace_id"))

    # -- export --------------------------------------------------------------------

    def export(self, run_id, trace_id=None, filter=None, q=None, step=None):
        """Yields a run's spans, one dict per span, in the export format
        ("treeline.span.v1", docs/api.md): everything the server holds about each span,
        bodies included. Traces come one after another, and a trace's spans in start
        order. `trace_id` exports one trace; `filter` (one test or a list, as for
        `traces`), `q` (search) and `step` pick traces as the trace list does.

        The answer is read as it arrives, line by line, never whole. Arguments are
        checked at the call; the request is sent when the first span is asked for, and
        errors (NotFound for an unknown run or trace, ApiError for a bad filter,
        AuthError) are raised then."""
        target = self._export_target(run_id, trace_id, filter, q, step)

        def spans():
            for line in self._lines(target):
                try:
                    span = json.loads(line)
                except ValueError:
                    raise ApiError(200, "invalid_response",
                                   "GET %s answered a line that is not JSON: %r"
                                   % (target, line[:80])) from None
                yield span
        return spans()

    def export_to(self, path_or_file, run_id, trace_id=None, filter=None, q=None,
                  step=None):
        """Writes `export(run_id, ...)` as JSON lines, the server's bytes unchanged, to a
        path or to a file object open for writing (text or binary), and returns the
        number of spans written. A path is written whole or not at all: the lines go to
        PATH.part, renamed to PATH once the export is complete."""
        target = self._export_target(run_id, trace_id, filter, q, step)
        if hasattr(path_or_file, "write"):
            return self._write_lines(path_or_file, target)
        path = os.fspath(path_or_file)
        part = path + ".part"
        try:
            with open(part, "wb") as f:
                n = self._write_lines(f, target)
            os.replace(part, path)
        except BaseException:
            try:
                os.unlink(part)
            except OSError:
                pass
            raise
        return n

    def _export_target(self, run_id, trace_id, filter, q, step):
        if trace_id is not None:
            _seg(trace_id, "trace_id")  # checked like a path segment; quoted below
        params = [("trace_id", trace_id)]
        params += [("filter", f) for f in _filters(filter)]
        params += [("q", _str_param(q, "q")), ("step", _int_param(step, "step"))]
        return "/api/runs/%s/export" % _seg(run_id, "run_id") + _query(params)

    def _write_lines(self, f, target):
        text = isinstance(f, io.TextIOBase)
        n = 0
        for line in self._lines(target):
            if not line.lstrip().startswith(b"{"):
                raise ApiError(200, "invalid_response",
                               "GET %s answered a line that is not a JSON object: %r"
                               % (target, line[:80]))
            line = line.rstrip(b"\r") + b"\n"
            f.write(line.decode("utf-8") if text else line)
            n += 1
        return n

    def _lines(self, target):
        """The lines of a JSON-lines answer (bytes, without the newline; blank lines
        left out), read and decompressed as they arrive."""
        for attempt in range(MAX_RETRIES + 1):
            resp, status, body, wait = self._open(target, "application/x-ndjson")
            if resp is not None:
                break
            if status == 503 and attempt < MAX_RETRIES:
                self._sleep(min(MAX_RETRY_WAIT, DEFAULT_RETRY_WAIT if wait is None else wait))
                continue
            raise self._error(status, body, target)
        with resp:
            kind = (resp.headers.get("Content-Type") or "").lower()
            if kind and "json" not in kind:
                raise ApiError(resp.status, "invalid_response",
                               "GET %s answered %s, not JSON lines; is %s a Treeline "
                               "server?" % (target, kind, self.url))
            pending = []
            for data in _chunks(resp, self.url + target):
                start = 0
                while True:
                    end = data.find(b"\n", start)
                    if end < 0:
                        if start < len(data):
                            pending.append(data[start:])
                        break
                    if pending:
                        pending.append(data[start:end])
                        line = b"".join(pending)
                        pending = []
                    else:
                        line = data[start:end]
                    start = end + 1
                    if line.strip():
                        yield line
            line = b"".join(pending)
            if line.strip():
                yield line

    # -- HTTP ----------------------------------------------------------------------

    def _pages(self, path, params, field, first=()):
        """The items of every page, following cursors; `first` goes with the first
        request only (where it starts: the cursor says where each next one does)."""
        # A generator of its own, so that the arguments above are checked at the call.
        def pages():
            cursor = None
            while True:
                start = [("cursor", cursor)] if cursor else list(first)
                body = self._get(path, params + start)
                for item in body.get(field) or ():
                    yield item
                cursor = body.get("next_cursor")
                if not cursor:
                    return
        return pages()

    def _get(self, path, params=()):
        target = path + _query(params)
        for attempt in range(MAX_RETRIES + 1):
            status, body, wait = self._request(target)
            if status == 503 and attempt < MAX_RETRIES:
                self._sleep(min(MAX_RETRY_WAIT, DEFAULT_RETRY_WAIT if wait is None else wait))
                continue
            break
        return self._answer("GET", target, status, body)

    def _write(self, method, path, obj):
        """Sends a JSON body; returns the answer's JSON. One Idempotency-Key for every
        attempt: a retry after an answer that was lost on the way replays the first."""
        data = json.dumps(obj, ensure_ascii=False, allow_nan=False).encode()
        key = new_key()
        for attempt in range(MAX_RETRIES + 1):
            try:
                status, body, wait = self._request(path, method, data, key)
            except Unreachable:
                if attempt == MAX_RETRIES:
                    raise
                self._sleep(DEFAULT_RETRY_WAIT * 2 ** attempt)  # a restart, a dropped link
                continue
            if status == 503 and attempt < MAX_RETRIES:
                self._sleep(min(MAX_RETRY_WAIT, DEFAULT_RETRY_WAIT if wait is None else wait))
                continue
            break
        return self._answer(method, path, status, body)

    def _answer(self, method, target, status, body):
        if 200 <= status < 300:
            try:
                return json.loads(body)
            except ValueError:
                raise ApiError(status, "invalid_response",
                               "%s %s answered something that is not JSON; is %s a "
                               "Treeline server?" % (method, target, self.url)) from None
        raise error_from_answer(status, body, "%s %s" % (method, target))

    def _error(self, status, body, target):
        return error_from_answer(status, body, "GET " + target)

    def _request(self, target, method="GET", data=None, key=None):
        """(status, body bytes, Retry-After seconds or None). Raises Unreachable."""
        resp, status, body, wait = self._open(target, "application/json", method, data, key)
        if resp is None:
            return status, body, wait
        try:
            with resp:
                return resp.status, _decoded(resp.read(), resp.headers), None
        except (http.client.HTTPException, OSError) as err:
            raise Unreachable("%s %s: %s" % (method, self.url + target, err)) from None

    def _open(self, target, accept, method="GET", data=None, key=None):
        """(response, None, None, None) for a 2xx answer, its body not read yet (the
        caller closes it); (None, status, body bytes, Retry-After seconds or None) for
        any other. Raises Unreachable."""
        headers = {"User-Agent": USER_AGENT, "Accept": accept, "Accept-Encoding": "gzip"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if key is not None:
            headers["Idempotency-Key"] = key
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        req = urllib.request.Request(self.url + target, data=data, headers=headers,
                                     method=method)
        try:
            # HTTPError is a URLError, so it must be caught first (below it is).
            try:
                return self._opener.open(req, timeout=self.timeout), None, None, None
            except urllib.error.HTTPError as err:
                with err:
                    body = _decoded(err.read(), err.headers)
                return None, err.code, body, retry_after(err.headers.get("Retry-After"))
        except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
            raise Unreachable("%s %s: %s" % (method, self.url + target, err)) from None


def error_from_answer(status, body, what):
    """The exception for an error answer: its {"error": {"code", "message"}}, else its
    text. `what` names the request ("GET /api/runs")."""
    code, message = None, None
    try:
        err = json.loads(body)["error"]
        code, message = err.get("code"), err.get("message")
    except (ValueError, TypeError, KeyError, AttributeError):
        pass
    if not message:
        text = (body or b"").decode("utf-8", "replace").strip()
        message = "%s failed%s" % (what, ": " + text[:200] if text else "")
    return _error_for(status, code, message)


def _query(params):
    query = "&".join("%s=%s" % (name, urllib.parse.quote(str(value), safe=""))
                     for name, value in params if value is not None and value != "")
    return "?" + query if query else ""


_CHUNK = 64 * 1024


def _chunks(resp, url):
    """The body of a response as it arrives, gunzipped when it was gzipped, in pieces of
    at most about 1 MiB."""
    gz = (resp.headers.get("Content-Encoding") or "").strip().lower() == "gzip"
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if gz else None
    read = getattr(resp, "read1", resp.read)
    while True:
        try:
            data = read(_CHUNK)
        except (http.client.HTTPException, OSError) as err:
            raise Unreachable("GET %s: the answer stopped part-way: %s" % (url, err)) from None
        if not data:
            break
        if inflate is None:
            yield data
            continue
        try:
            while data:
                out = inflate.decompress(data, 16 * _CHUNK)
                data = inflate.unconsumed_tail
                if out:
                    yield out
        except zlib.error as err:
            raise ApiError(resp.status, "invalid_response",
                           "GET %s: the gzip answer cannot be decoded: %s" % (url, err)) \
                from None
    if inflate is not None:
        rest = inflate.flush()
        if rest:
            yield rest
        if not inflate.eof:
            raise Unreachable("GET %s: the answer stopped part-way (its gzip stream is "
                          "incomplete)" % url)


def _decoded(data, headers):
    if data and (headers.get("Content-Encoding") or "").strip().lower() == "gzip":
        try:
            return gzip.decompress(data)
        except (OSError, EOFError):
            pass  # left as it came: it then reads as an answer that is not JSON
    return data or b""
