"""Client.export / export_to and treeline.import_spans: against a scripted stand-in
(streaming, gzip, errors, batching, problems) and against real servers (a run exported
from one server and imported into a fresh one exports the same)."""

import gzip
import http.server
import io
import json
import secrets
import time

import pytest

import treeline as tl
from fakeserver import serve_in_thread, stop_serving
from treeline import transfer


class Stub:
    """GET answers come from `script`, a list of (status, headers, body pieces); each
    piece is sent as an HTTP chunk, so lines arrive split across reads. PUT and POST are
    recorded (decoded) and answered from `answers` (a list of (status, JSON)), else 201
    for a PUT and `accepted: n` for a POST."""

    def __init__(self):
        self.script = []
        self.answers = []
        self.requests = []  # (method, path, headers, decoded JSON body or None)
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                stub.requests.append(("GET", self.path, dict(self.headers), None))
                status, headers, pieces = stub.script.pop(0) if stub.script else (
                    200, {}, [b""])
                if isinstance(pieces, dict):
                    pieces = [json.dumps(pieces).encode()]
                self.send_response(status)
                headers = dict(headers)
                headers.setdefault("Content-Type", "application/x-ndjson")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for piece in pieces:
                    if piece:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            def _write(self):
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    data = gzip.decompress(data)
                elif self.headers.get("Content-Encoding") == "zstd":
                    from fakeserver import zstd_decompress
                    data = zstd_decompress(data)
                body = json.loads(data) if data else None
                stub.requests.append((self.command, self.path, dict(self.headers), body))
                if stub.answers:
                    status, answer = stub.answers.pop(0)
                elif self.command == "PUT":
                    status, answer = 201, {"run_id": self.path.rsplit("/", 1)[-1]}
                else:
                    status, answer = 200, {"accepted": len(body["events"]), "rejected": [],
                                           "warnings": []}
                out = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_PUT = do_POST = _write

        self.httpd, self.url = serve_in_thread(Handler)

    def stop(self):
        stop_serving(self.httpd)

    def writes(self, method=None):
        return [r for r in self.requests if r[0] != "GET" and (method is None or r[0] == method)]

    def events(self):
        return [e for r in self.writes("POST") for e in r[3]["events"]]


@pytest.fixture
def stub():
    s = Stub()
    yield s
    s.stop()


def _client(url, **kw):
    client = tl.Client(url, **kw)
    client.waits = []
    client._sleep = client.waits.append
    return client


def _line(i, **fields):
    span = {"format": "treeline.span.v1", "run_id": "r1", "project": "p",
            "trace_id": "t%d" % (i // 10), "span_id": "s%d" % i,
            "parent_span_id": None if i % 10 == 0 else "s%d" % (i - i % 10),
            "ordinal": 0 if i % 10 == 0 else i % 10 - 1, "name": "span %d" % i,
            "kind": "tool", "status": "ok", "start_us": 1764420000000000 + i,
            "end_us": 1764420000000100 + i, "step": None, "rank": None, "thread_id": "main",
            "token_count": None, "attributes": {}, "metrics": {}, "links": [],
            "input": None, "output": None, "error": None}
    span.update(fields)
    return span


def _ndjson(spans):
    return b"".join(json.dumps(s).encode() + b"\n" for s in spans)


# -- export, against the stand-in ----------------------------------------------------

def test_export_streams_lines_split_anywhere(stub):
    spans = [_line(i, input={"text": "é" * i}) for i in range(30)]
    # Blank lines between, and no newline after the last.
    data = _ndjson(spans[:10]) + b"\n\n" + _ndjson(spans[10:]).rstrip(b"\n")
    pieces = [data[i:i + 37] for i in range(0, len(data), 37)]
    stub.script = [(200, {}, pieces)]
    client = _client(stub.url, api_key="tl_k")
    exported = client.export("r 1", trace_id="t/1",
                             filter=["attr.reward < 0.5", "error_count > 0"], q="a b", step=3)
    assert stub.requests == []  # nothing is sent before the first span is asked for
    assert list(exported) == spans
    path, headers = stub.requests[0][1], stub.requests[0][2]
    assert path == ("/api/runs/r%201/export?trace_id=t%2F1&filter=attr.reward%20%3C%200.5"
                    "&filter=error_count%20%3E%200&q=a%20b&step=3")
    assert headers["Authorization"] == "Bearer tl_k"
    assert headers["Accept"] == "application/x-ndjson" and "gzip" in headers["Accept-Encoding"]
    list(client.export("r"))
    assert stub.requests[-1][1] == "/api/runs/r/export"
    stub.script = [(200, {}, [_ndjson(spans)])]
    partial = client.export("r")
    assert next(partial) == spans[0]
    partial.close()  # stopping early closes the connection


def test_export_decodes_a_gzip_stream_as_it_arrives(stub):
    spans = [_line(i, output="x" * (i % 300)) for i in range(3000)]
    data = gzip.compress(_ndjson(spans))
    pieces = [data[i:i + 1000] for i in range(0, len(data), 1000)]
    stub.script = [(200, {"Content-Encoding": "gzip"}, pieces)]
    assert list(_client(stub.url).export("r1")) == spans

    stub.script = [(200, {"Content-Encoding": "gzip"}, [data[: len(data) // 2]])]
    with pytest.raises(tl.Unreachable):  # the gzip stream stops part-way
        list(_client(stub.url).export("r1"))


def test_export_errors_are_those_of_the_other_calls(stub):
    client = _client(stub.url)
    err = {"error": {"code": "run_not_found", "message": "run r-404 not found"}}
    stub.script = [(404, {"Content-Type": "application/json"}, err)]
    with pytest.raises(tl.NotFound) as info:
        list(client.export("r-404"))
    assert (info.value.code, info.value.message) == ("run_not_found", "run r-404 not found")

    stub.script = [(400, {"Content-Type": "application/json"},
                    {"error": {"code": "bad_filter", "message": "filter \"x\": no"}})]
    with pytest.raises(tl.ApiError) as info:
        list(client.export("r1", filter="x"))
    assert info.value.status == 400 and info.value.code == "bad_filter"

    stub.script = [(401, {"Content-Type": "application/json"},
                    {"error": {"code": "unauthorized", "message": "no key"}})]
    with pytest.raises(tl.AuthError):
        list(client.export("r1"))

    busy = (503, {"Retry-After": "2", "Content-Type": "application/json"},
            {"error": {"code": "unavailable", "message": "busy"}})
    stub.script = [busy, (200, {}, [_ndjson([_line(0)])])]
    assert list(client.export("r1")) == [_line(0)] and client.waits == [2]

    stub.script = [(200, {"Content-Type": "text/html"}, [b"<html>a dashboard</html>"])]
    with pytest.raises(tl.ApiError) as info:
        list(client.export("r1"))
    assert info.value.code == "invalid_response"
    stub.script = [(200, {}, [b'{"span_id": "a"}\n<html>\n'])]
    with pytest.raises(tl.ApiError) as info:
        list(client.export("r1"))
    assert info.value.code == "invalid_response"


def test_export_arguments_are_checked_at_the_call():
    client = tl.Client("http://127.0.0.1:1")
    for bad in (dict(step="3"), dict(filter=3), dict(trace_id=""), dict(q=1)):
        with pytest.raises(TypeError):
            client.export("r", **bad)
    with pytest.raises(TypeError):
        client.export("")
    with pytest.raises(TypeError):
        client.export_to(io.BytesIO(), "r", step=1.5)


def test_export_to_a_path_or_a_file(stub, tmp_path):
    spans = [_line(i, input="ünï") for i in range(12)]
    client = _client(stub.url)
    stub.script = [(200, {}, [_ndjson(spans)])]
    path = tmp_path / "run.jsonl"
    assert client.export_to(path, "r1") == 12
    assert [json.loads(x) for x in path.read_text("utf-8").splitlines()] == spans
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl"]

    stub.script = [(200, {}, [_ndjson(spans)])]
    text = io.StringIO()
    assert client.export_to(text, "r1") == 12
    assert [json.loads(x) for x in text.getvalue().splitlines()] == spans
    stub.script = [(200, {}, [_ndjson(spans)])]
    binary = io.BytesIO()
    assert client.export_to(binary, "r1") == 12
    assert binary.getvalue() == _ndjson(spans)

    # A failed export leaves no file behind, and an earlier one as it was.
    stub.script = [(404, {"Content-Type": "application/json"},
                    {"error": {"code": "trace_not_found", "message": "no"}})]
    with pytest.raises(tl.NotFound):
        client.export_to(tmp_path / "other.jsonl", "r1", trace_id="nope")
    stub.script = [(200, {}, [_ndjson(spans[:3]) + b"<html>\n"])]
    with pytest.raises(tl.ApiError):
        client.export_to(path, "r1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl"]
    assert len(path.read_text("utf-8").splitlines()) == 12


# -- import, against the stand-in ----------------------------------------------------

def test_import_writes_each_line_as_an_open_and_a_close(stub, tmp_path):
    spans = [
        _line(0, attributes={"reward": 0.5}, input={"q": 1}, output={"a": 2}, step=4, rank=1,
              token_count=12, metrics={"m": 1.5},
              links=[{"trace_id": "t9", "span_id": "s90"}]),
        _line(1, status="error", error={"type": "ValueError", "message": "bad"}),
        _line(2, status="running", end_us=None, attributes={"k": "v"}),
        _line(3, status="interrupted", end_us=None),
        _line(4, run_id="r2", project="q", ordinal=None),
    ]
    path = tmp_path / "in.jsonl"
    path.write_bytes(_ndjson(spans))
    result = tl.import_spans(str(path), url=stub.url, api_key="tl_write")
    assert result.ok and result.problems == []
    assert (result.spans, result.lines, result.skipped, result.rejected) == (5, 5, 0, 0)
    assert result.runs == ["r1", "r2"]
    puts = stub.writes("PUT")
    assert [(r[1], r[3]) for r in puts] == [("/api/runs/r1", {"project": "p"}),
                                            ("/api/runs/r2", {"project": "q"})]
    posts = stub.writes("POST")
    assert [r[1] for r in posts] == ["/api/runs/r1/traces/events", "/api/runs/r2/traces/events"]
    assert all(r[2]["Authorization"] == "Bearer tl_write" and r[2]["Idempotency-Key"]
               for r in posts)
    events = {(e["op"], e["span_id"]): e for e in stub.events()}
    assert events[("open", "s0")] == {
        "op": "open", "trace_id": "t0", "span_id": "s0", "ordinal": 0, "name": "span 0",
        "kind": "tool", "ts": 1764420000000000, "step": 4, "rank": 1, "thread_id": "main",
        "attributes": {"reward": 0.5}, "input": {"q": 1}}
    assert events[("close", "s0")] == {
        "op": "close", "trace_id": "t0", "span_id": "s0", "ts": 1764420000000100,
        "status": "ok", "output": {"a": 2}, "token_count": 12, "metrics": {"m": 1.5},
        "links": [{"trace_id": "t9", "span_id": "s90"}]}
    assert events[("open", "s1")]["parent_span_id"] == "s0"
    assert events[("open", "s1")]["ordinal"] == 0
    assert events[("close", "s1")]["error"] == {"type": "ValueError", "message": "bad"}
    assert ("close", "s2") not in events  # still running: no close
    assert events[("open", "s2")]["attributes"] == {"k": "v"}
    assert events[("close", "s3")]["ts"] == 1764420000000003  # no end: its start
    assert "ordinal" not in events[("open", "s4")]
    assert "imported 5 spans into runs r1, r2" in result.summary()


def test_import_reports_bad_lines_by_number_and_goes_on(stub):
    good = [_line(i) for i in range(4)]
    lines = [json.dumps(good[0]), "{not json", json.dumps(good[1]), "",
             json.dumps({k: v for k, v in good[2].items() if k != "kind"}),
             json.dumps(dict(good[3], format="treeline.span.v2")),
             "[1, 2]", json.dumps(dict(good[3], run_id="bad id", start_us=None)),
             json.dumps(good[3])]
    result = tl.import_spans(io.StringIO("\n".join(lines) + "\n"), url=stub.url)
    assert [p.line for p in result.problems] == [2, 5, 6, 7, 8]
    messages = [str(p) for p in result.problems]
    assert messages[0].startswith("line 2: not valid JSON")
    assert messages[1] == "line 5: kind is missing; skipped"
    assert "treeline.span.v2" in messages[2]
    assert messages[3] == "line 7: not a JSON object; skipped"
    assert messages[4] == "line 8: start_us is missing; skipped"
    assert (result.spans, result.lines, result.skipped) == (3, 8, 5)
    assert [e["span_id"] for e in stub.events() if e["op"] == "open"] == ["s0", "s1", "s3"]
    assert not result.ok


def test_import_maps_rejections_and_warnings_to_lines(stub):
    stub.answers = [(201, {}), (200, {"accepted": 5, "rejected": [
        {"index": 1, "code": "invalid_status", "message": "status \"done\" is not valid"},
        {"index": 2, "code": "invalid_kind", "message": "kind \"llm\" is not valid"}],
        "warnings": [{"index": 4, "message": "span s2 was already opened"}]})]
    spans = [_line(0, status="done"), _line(1, kind="llm"), _line(2)]
    result = tl.import_spans(spans, url=stub.url)
    assert [str(p) for p in result.problems] == [
        'line 1: the server rejected its close event: invalid_status: status "done" is not valid',
        'line 2: the server rejected its open event: invalid_kind: kind "llm" is not valid']
    assert result.spans == 2 and result.rejected == 2 and result.warnings == 1
    assert result.warning_examples[0].line == 3
    assert result.as_dict()["problems"][0]["line"] == 1


def test_import_batches_by_count_and_size(stub):
    many = [_line(i) for i in range(1300)]  # 2600 events
    result = tl.import_spans(iter(many), url=stub.url)
    sizes = [len(r[3]["events"]) for r in stub.writes("POST")]
    assert sum(sizes) == 2600 and max(sizes) <= 1000 and result.spans == 1300
    # Events of a span stay in order: its open before its close.
    order = [(e["op"], e["span_id"]) for e in stub.events()]
    assert order.index(("open", "s777")) < order.index(("close", "s777"))

    stub.requests.clear()
    big = [_line(i, trace_id="big", input="x" * (700 << 10)) for i in range(12)]
    result = tl.import_spans(big, url=stub.url)
    posts = stub.writes("POST")
    assert len(posts) >= 3 and result.spans == 12
    assert all(len(json.dumps(r[3])) <= transfer.MAX_BATCH_BYTES + 1024 for r in posts)
    assert len(stub.writes("PUT")) == 1


def test_import_into_another_run_and_from_strings(stub):
    lines = [json.dumps(_line(0)), json.dumps(_line(1, run_id="other", project="p")).encode()]
    result = tl.import_spans(lines, url=stub.url, run_id="copy-1")
    assert result.runs == ["copy-1"] and result.spans == 2
    assert [r[1] for r in stub.writes()] == ["/api/runs/copy-1",
                                             "/api/runs/copy-1/traces/events"]
    with pytest.raises(ValueError):
        tl.import_spans([], url=stub.url, run_id="no spaces allowed")
    with pytest.raises(TypeError):
        tl.import_spans(_line(0), url=stub.url)  # one dict is not a source


def test_a_run_of_another_project_is_skipped_and_the_others_imported(stub):
    stub.answers = [(409, {"error": {"code": "run_project_conflict",
                                     "message": "run r1 belongs to another project"}})]
    lines = [_line(0), _line(1), _line(2, run_id="r2", project="q")]
    result = tl.import_spans(lines, url=stub.url)
    assert result.skipped == 2 and result.spans == 1 and result.runs == ["r2"]
    assert [p.line for p in result.problems] == [1, 2]
    assert "run r1" in result.problems[0].message and "run_id=" in result.problems[0].message
    assert [r[1] for r in stub.writes("POST")] == ["/api/runs/r2/traces/events"]


def test_import_stops_at_a_request_refused_as_a_whole(stub):

    stub.answers = [(401, {"error": {"code": "unauthorized", "message": "no key"}})]
    with pytest.raises(tl.AuthError):
        tl.import_spans([_line(0)], url=stub.url)

    stub.answers = [(201, {}), (403, {"error": {"code": "forbidden", "message": "read key"}})]
    with pytest.raises(tl.AuthError) as info:
        tl.import_spans([_line(0)], url=stub.url)
    assert "read key" in info.value.message


# -- against real servers -----------------------------------------------------------

def _sorted(spans):
    return sorted(spans, key=lambda s: (s["run_id"], s["trace_id"], s["start_us"], s["span_id"]))


@pytest.fixture(scope="module")
def source_run(server, tmp_path_factory):
    """A run of three traces written with the SDK, flushed, its last span still open."""
    run = tl.init("export-" + secrets.token_hex(4), url=server.url, capture="preview",
                  finish_on_exit=False, spool_dir=str(tmp_path_factory.mktemp("spool")))
    ids = {}
    with run.trace("episode failing", kind="rollout", step=1, rank=0,
                   attributes={"reward": 0.25, "env": "CartPole-v1"},
                   inputs={"episode": 1}) as failing:
        with failing.agent("planner", inputs={"task": "plan"}) as planner:
            with planner.model("policy", prompt=[{"role": "user", "content": "hi"}]) as llm:
                llm.completion("hello")
                llm.token_count = 12
                llm.log_metric("latency_ms", 3.5)
            with planner.tool("search", inputs={"q": "spiders"}, thread_id="worker-2"):
                pass
        with pytest.raises(ValueError):
            with failing.tool("lookup") as broken:
                raise ValueError("bad obs")
        failing.set_output({"return": -1.0})
    ids["failing"] = failing.trace_id
    with run.trace("episode fine", kind="rollout", step=2,
                   attributes={"reward": 0.75, "tags": ["a", "b"]}) as fine:
        late = [fine.span("late %d" % i, kind="env_step") for i in range(3)]
        for span in reversed(late):  # started in reverse creation order
            span.start()
            span.log_metric("reward", 1.0)
            span.end()
        with fine.span("linked", kind="reward") as linked:
            linked.add_link(broken)
            linked.set_attribute("score", 3)
    ids["fine"] = fine.trace_id
    with run.trace("episode open", kind="agent", step=3) as still:
        running = still.span("still running", kind="tool").start()  # ended at teardown
    ids["open"] = still.trace_id
    assert run.flush() is True
    yield {"run": run, "ids": ids, "spans": 5 + 5 + 2}
    running.end()
    run.flush(5)


@pytest.mark.server
def test_export_then_import_into_a_fresh_server_exports_the_same(
        server, server_factory, source_run, tmp_path):
    run = source_run["run"]
    client = tl.Client(server.url)
    first = list(client.export(run.run_id))
    assert len(first) == source_run["spans"]
    assert all(s["format"] == "treeline.span.v1" and s["run_id"] == run.run_id
               and s["project"] == run.project for s in first)
    # Traces one after another; in a trace, spans in start order.
    seen_traces = []
    for s in first:
        if not seen_traces or seen_traces[-1] != s["trace_id"]:
            assert s["trace_id"] not in seen_traces
            seen_traces.append(s["trace_id"])
    assert len(seen_traces) == 3
    for trace_id in seen_traces:
        keys = [(s["start_us"], s["span_id"]) for s in first if s["trace_id"] == trace_id]
        assert keys == sorted(keys)
    by_name = {s["name"]: s for s in first}
    assert by_name["lookup"]["status"] == "error"
    error = by_name["lookup"]["error"]
    assert (error["type"], error["message"]) == ("ValueError", "bad obs")
    assert error["traceback"].endswith("ValueError: bad obs\n")
    assert by_name["still running"]["status"] == "running"
    assert by_name["still running"]["end_us"] is None
    assert by_name["policy"]["token_count"] == 12
    assert by_name["policy"]["metrics"] == {"latency_ms": 3.5}
    assert by_name["policy"]["output"] == "hello"
    assert by_name["search"]["thread_id"] == "worker-2"
    assert by_name["episode failing"]["input"] == {"episode": 1}
    assert by_name["episode failing"]["attributes"] == {"reward": 0.25, "env": "CartPole-v1"}
    assert by_name["linked"]["links"] == [{"trace_id": source_run["ids"]["failing"],
                                          "span_id": by_name["lookup"]["span_id"]}]
    assert [by_name["late %d" % i]["ordinal"] for i in range(3)] == [0, 1, 2]
    assert by_name["linked"]["ordinal"] == 3

    path = tmp_path / "run.jsonl"
    assert client.export_to(path, run.run_id) == len(first)
    fresh = server_factory(data_dir=str(tmp_path / "fresh")).start()
    result = tl.import_spans(path, url=fresh.url)
    assert result.ok, result.problems
    assert (result.spans, result.lines, result.runs) == (len(first), len(first), [run.run_id])

    second = list(tl.Client(fresh.url).export(run.run_id))
    assert _sorted(second) == _sorted(first)
    # The same trees, listed the same way.
    other = tl.Client(fresh.url)
    for trace_id in source_run["ids"].values():
        root = next(client.spans(run.run_id, trace_id))
        assert next(other.spans(run.run_id, trace_id)) == root
        assert list(other.spans(run.run_id, trace_id, parent=root["span_id"])) == \
            list(client.spans(run.run_id, trace_id, parent=root["span_id"]))
    assert tl.Client(fresh.url).run(run.run_id)["project"] == run.project

    # Importing again stores nothing twice.
    again = tl.import_spans(first, url=fresh.url)
    assert again.spans == len(first) and again.warnings > 0 and again.rejected == 0
    assert _sorted(tl.Client(fresh.url).export(run.run_id)) == _sorted(first)


@pytest.mark.server
def test_export_of_one_trace_and_of_filtered_traces(server, source_run):
    run, ids = source_run["run"], source_run["ids"]
    client = tl.Client(server.url)
    one = list(client.export(run.run_id, trace_id=ids["fine"]))
    assert len(one) == 5 and {s["trace_id"] for s in one} == {ids["fine"]}
    assert one[0]["parent_span_id"] is None and one[0]["name"] == "episode fine"

    failed = list(client.export(run.run_id, filter="error_count > 0"))
    assert {s["trace_id"] for s in failed} == {ids["failing"]} and len(failed) == 5
    low = list(client.export(run.run_id, filter=["attr.reward < 0.5", "attr.env exists"]))
    assert {s["trace_id"] for s in low} == {ids["failing"]}
    assert {s["trace_id"] for s in client.export(run.run_id, step=3)} == {ids["open"]}
    assert {s["trace_id"] for s in client.export(run.run_id, q="fine")} == {ids["fine"]}

    with pytest.raises(tl.NotFound) as info:
        list(client.export("no-such-run-" + secrets.token_hex(4)))
    assert info.value.code == "run_not_found"
    with pytest.raises(tl.NotFound) as info:
        list(client.export(run.run_id, trace_id="f" * 32))
    assert info.value.code == "trace_not_found"
    with pytest.raises(tl.ApiError) as info:
        list(client.export(run.run_id, filter="reward > 1"))
    assert info.value.status == 400 and not isinstance(info.value, tl.NotFound)


@pytest.mark.server
def test_import_skips_a_malformed_line_and_keeps_the_others(server, tmp_path):
    rid, tid = "import-" + secrets.token_hex(6), secrets.token_hex(16)
    now = time.time_ns() // 1000

    def line(span_id, parent, ordinal, **fields):
        span = {"format": "treeline.span.v1", "run_id": rid, "project": "imported",
                "trace_id": tid, "span_id": span_id, "parent_span_id": parent,
                "ordinal": ordinal, "name": span_id, "kind": "tool", "status": "ok",
                "start_us": now, "end_us": now + 10, "attributes": {"k": span_id}}
        span.update(fields)
        return json.dumps(span)

    path = tmp_path / "in.jsonl"
    path.write_text("\n".join([
        line("root", None, 0, kind="rollout"),
        '{"format": "treeline.span.v1", "run_id": ',            # line 2: cut short
        line("b", "root", 0),
        line("a", "root", 1, status="error", error={"type": "E"}),
        line("no-kind", "root", 2, kind=None),                  # line 5: kind is null
        line("c", "root", 2, status="running", end_us=None),
    ]) + "\n")
    result = tl.import_spans(str(path), url=server.url)
    assert [(p.line, "JSON" in p.message or "kind" in p.message) for p in result.problems] \
        == [(2, True), (5, True)]
    assert (result.spans, result.skipped, result.rejected) == (4, 2, 0)

    client = tl.Client(server.url)
    assert client.run(rid)["project"] == "imported"
    (root,) = list(client.spans(rid, tid))
    assert root["span_id"] == "root" and root["child_count"] == 3
    children = list(client.spans(rid, tid, parent="root"))
    # By ordinal: they start together, and their ids sort the other way.
    assert [c["span_id"] for c in children] == ["b", "a", "c"]
    assert [c["status"] for c in children] == ["ok", "error", "running"]
    assert client.span(rid, tid, "b")["attributes"] == {"k": "b"}


@pytest.mark.server
def test_export_and_import_with_keys(server_factory, tmp_path):
    key = "tl_" + secrets.token_urlsafe(32)
    key_file = tmp_path / "keys"
    key_file.write_text("%s\n" % key)
    keyed = server_factory(data_dir=str(tmp_path / "data"),
                           args=["--api-key-file", str(key_file)]).start()
    lines = [_line(0, run_id="keyed-run"), _line(1, run_id="keyed-run")]
    with pytest.raises(tl.AuthError):
        tl.import_spans(lines, url=keyed.url)
    result = tl.import_spans(lines, url=keyed.url, api_key=key)
    assert result.ok and result.spans == 2

    with pytest.raises(tl.AuthError) as info:
        list(tl.Client(keyed.url).export("keyed-run"))
    assert info.value.status == 401
    exported = list(tl.Client(keyed.url, api_key=key).export("keyed-run"))
    assert [s["span_id"] for s in exported] == ["s0", "s1"]
