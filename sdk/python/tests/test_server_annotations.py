"""Annotations: `span.annotate` during a run (sent after its span, never before) and
`Client.annotate`, `delete_annotation`, `annotations` afterwards; against stand-ins
(ordering, spooling, retries) and against a real `treeline serve`."""

import collections
import gzip
import http.server
import json
import secrets
import time

import pytest

import treeline as tl
from treeline import delivery
from conftest import MemoryTransport
from fakeserver import serve_in_thread, stop_serving, zstd_decompress


# -- checked where they are made ------------------------------------------------------

BAD_NAMES = ["", "has space", "a=b", "score>1", "it's", "f(x)", "a,b", "tab\t", "x" * 129]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_annotation_a_bad_name_is_dropped_in_a_run_and_raised_by_the_client(name, make_run,
                                                                            transport):
    run = make_run()
    client = tl.Client("http://127.0.0.1:1")
    with run.trace("t") as root:
        assert root.annotate(name, 1) is root  # never raised into the training loop
    assert run.counters()["dropped_values"] == 1
    with pytest.raises(ValueError, match="name"):
        client.annotate("r", "t", name=name, value=1)  # refused before anything is sent
    with pytest.raises(ValueError, match="name"):
        client.delete_annotation("r", "t", name)
    assert run.flush()
    assert not [r for r in transport.sent if "/annotations" in r["path"]]


def test_annotation_values_and_comments_are_checked_like_the_server_does(make_run, transport):
    run = make_run()
    client = tl.Client("http://127.0.0.1:1")
    bad = [(float("nan"), None), (float("inf"), None), ("x" * 1025, None), ("é" * 513, None),
           ("a\0b", None), (10 ** 400, None), ([1], None), ({"a": 1}, None), (None, None),
           (b"bytes", None), (1, "c" * 4001), (1, 3)]
    with run.trace("t") as root:
        for value, comment in bad:
            root.annotate("score", value, comment=comment)  # dropped, not raised
        root.annotate("label", "x" * 1024, comment="c" * 4000)  # the limits themselves pass
        root.annotate("utf8.ok-name_1", "é" * 512)
    assert run.counters()["dropped_values"] == len(bad)
    for value, comment in bad:
        field = "comment" if comment is not None else "value"
        with pytest.raises((ValueError, TypeError), match=field):
            client.annotate("r", "t", name="score", value=value, comment=comment)
    assert run.flush()
    sent = [r for r in transport.sent if "/annotations" in r["path"]]
    assert len(sent) == 2, "only the two good annotations went out"
    off = make_run(tracing=False)
    with off.trace("inert") as inert:  # an inert span sends nothing
        assert inert.annotate("bad name", 1) is inert
        assert inert.annotate("fine", True) is inert


class StrictTransport(MemoryTransport):
    """Answers an annotation as the server does when its span is not there yet (404
    span_not_found), and takes its time over event batches so that several are on the
    wire at once."""

    def __init__(self):
        super().__init__()
        self.opened = set()
        self.notes = []
        self.forget = False  # True: the server never has the spans

    def send(self, method, path, body, content_encoding=None, idempotency_key=None):
        if path.endswith("/annotations"):
            raw = {"gzip": gzip.decompress, "zstd": zstd_decompress}.get(
                content_encoding, bytes)(body)
            note = json.loads(raw)
            with self.lock:
                self.attempts.append((method, path, idempotency_key))
                if note["span_id"] not in self.opened:
                    return 404, {"error": {"code": "span_not_found", "message": "no span"}}
                self.notes.append((note, idempotency_key))
            return 200, dict(note, kind="number")
        if path.endswith("/traces/events"):
            time.sleep(0.005)
        status, answer = super().send(method, path, body, content_encoding, idempotency_key)
        with self.lock:
            if not self.forget:
                self.opened.update(e["span_id"] for e in self.events() if e["op"] == "open")
        return status, answer


def test_span_annotations_never_arrive_before_their_span(make_run):
    transport = StrictTransport()
    run = make_run(transport=transport, batch_bytes=2048, max_inflight=4)
    made = []
    for i in range(300):
        with run.trace("rollout %d" % i, kind="rollout", step=i) as root:
            with root.span("reward", kind="reward") as reward:
                reward.annotate("score", i / 10)  # right after the open was queued
            made.append(reward.span_id)
        root.annotate("done", True)  # after the close: still fine
    late = run.trace("made, annotated, then opened")
    late.annotate("early", "before the open")  # held until the open is queued
    with late:
        pass
    assert run.flush(30)
    assert run.counters()["refused_requests"] == 0
    sent = {(n["span_id"], n["name"]): n for n, _ in transport.notes}
    assert len(sent) == 601
    assert [sent[(s, "score")]["value"] for s in made] == [i / 10 for i in range(300)]
    assert sent[(late.span_id, "early")] == {"name": "early", "value": "before the open",
                                             "source": "code", "span_id": late.span_id}
    keys = [k for _, k in transport.notes]
    assert all(keys) and len(set(keys)) == len(keys)  # each PUT has its own key


def test_span_annotations_wait_in_the_spool_behind_their_span(make_run, transport):
    transport.down = True
    run = make_run(max_retries=1)
    run._sender.backoff = 0.01
    with run.trace("while down") as root:
        root.annotate("score", 3, comment="spooled")
    assert run.flush(10) is False
    transport.down = False
    assert run.flush(10) is True
    order = [(r["method"], r["path"].rsplit("/", 1)[1]) for r in transport.sent]
    assert order.index(("PUT", "annotations")) > order.index(("POST", "events"))
    note = [r for r in transport.sent if r["path"].endswith("/annotations")][0]
    assert note["path"] == "/api/runs/%s/traces/%s/annotations" % (run.run_id, root.trace_id)
    assert note["body"] == {"name": "score", "value": 3, "comment": "spooled",
                            "source": "code", "span_id": root.span_id}
    assert note["key"]


def test_a_refused_span_annotation_is_counted_and_logged_not_raised(
        make_run, caplog, monkeypatch):
    monkeypatch.setattr(delivery, "_warned", collections.Counter())  # said afresh
    transport = StrictTransport()
    transport.forget = True  # the server lost the span: its annotation is refused
    run = make_run(transport=transport)
    with caplog.at_level("WARNING", logger="treeline"):
        with run.trace("t") as root:
            assert root.annotate("score", 1) is root  # nothing raised into the loop
        assert run.flush(10) is True  # refused, not kept: nothing waits on disk
    assert run.counters()["refused_requests"] == 1
    assert "span annotation" in caplog.text and "span_not_found" in caplog.text


# -- the client's writes, against a scripted stand-in ---------------------------------

class WriteStub:
    """Answers from `script`: (status, headers, body), or "drop" to close the
    connection without an answer; then 200 with the request's own body."""

    def __init__(self):
        self.script = []
        self.requests = []  # (method, path, headers, body)
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _handle(self):
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(data) if data else None
                stub.requests.append((self.command, self.path, dict(self.headers), body))
                status, headers, answer = stub.script.pop(0) if stub.script else (200, {}, body)
                if status == "drop":
                    self.close_connection = True
                    return
                data = json.dumps(answer).encode()
                self.send_response(status)
                for k, v in dict(headers, **{"Content-Type": "application/json"}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_DELETE = _handle

        self.httpd, self.url = serve_in_thread(Handler)

    def stop(self):
        stop_serving(self.httpd)


@pytest.fixture
def stub():
    s = WriteStub()
    yield s
    s.stop()


def _client(url, **kw):
    client = tl.Client(url, **kw)
    client.waits = []
    client._sleep = client.waits.append  # record waits instead of sleeping
    return client


def test_annotation_writes_retry_503_and_network_errors_under_one_key(stub):
    client = _client(stub.url, api_key="tl_writer")
    busy = (503, {"Retry-After": "2"}, {"error": {"code": "unavailable", "message": "busy"}})
    stub.script = [busy, ("drop", None, None), busy]
    stored = client.annotate("run 1", "t1", "s1", name="score", value=0.5, comment="ok")
    assert stored == {"name": "score", "value": 0.5, "comment": "ok", "source": "code",
                      "span_id": "s1"}
    assert client.waits == [2, 2, 2]  # Retry-After 2; 2 s before a second try; Retry-After 2
    methods = {m for m, _, _, _ in stub.requests}
    keys = {h["Idempotency-Key"] for _, _, h, _ in stub.requests}
    assert methods == {"PUT"} and len(stub.requests) == 4 and len(keys) == 1
    path, headers = stub.requests[0][1], stub.requests[0][2]
    assert path == "/api/runs/run%201/traces/t1/annotations"
    assert headers["Content-Type"] == "application/json"
    assert headers["Authorization"] == "Bearer tl_writer"

    stub.requests.clear()
    client.annotate("r", "t", name="verdict", value=True)  # a new call, a new key
    assert stub.requests[0][3] == {"name": "verdict", "value": True, "source": "code"}
    assert stub.requests[0][2]["Idempotency-Key"] not in keys

    stub.requests.clear()
    stub.script = [(400, {}, {"error": {"code": "invalid_annotation", "message": "no"}}),
                   busy]
    with pytest.raises(tl.ApiError) as info:
        client.annotate("r", "t", name="score", value="high")
    assert info.value.code == "invalid_annotation" and len(stub.requests) == 1

    stub.requests.clear()
    stub.script = [busy] * 5
    with pytest.raises(tl.ApiError) as info:
        client.delete_annotation("r", "t", "score", span_id="s1")
    assert info.value.status == 503 and len(stub.requests) == 4  # 3 retries, then raise
    assert stub.requests[0][0] == "DELETE"
    assert stub.requests[0][3] == {"name": "score", "span_id": "s1"}


def test_annotation_writes_to_a_server_that_is_not_there_raise_unreachable(stub):
    client = _client(stub.url)
    stub.script = [("drop", None, None)] * 4
    with pytest.raises(tl.Unreachable):
        client.annotate("r", "t", name="score", value=1)
    assert client.waits == [1, 2, 4] and len(stub.requests) == 4


# -- against a real server ------------------------------------------------------------

def _run(server, tmp_path, **options):
    return tl.init("annotations-" + secrets.token_hex(3), url=server.url,
                   finish_on_exit=False, spool_dir=str(tmp_path / "spool"), **options)


def _by_name(notes):
    return {(n["span_id"], n["name"]): n for n in notes}


@pytest.mark.server
def test_span_annotate_during_a_run_reads_back(server, tmp_path):
    run = _run(server, tmp_path, batch_bytes=4096)
    rollouts = []
    for i in range(40):
        with run.trace("rollout %d" % i, kind="rollout", step=i) as root:
            with root.span("grader", kind="evaluator") as grader:
                grader.annotate("score", i * 0.25, comment="graded %d" % i)
                grader.annotate("reward_hacking", i % 7 == 0)
            root.annotate("label", "ok" if i % 2 else "needs review")
        rollouts.append((root, grader))
    assert run.finish() is True
    assert run.counters()["refused_requests"] == 0

    client = tl.Client(server.url)
    root, grader = rollouts[7]
    notes = client.annotations(run.run_id, root.trace_id)
    assert len(notes) == 3
    got = _by_name(notes)
    score = got[(grader.span_id, "score")]
    assert score["value"] == 1.75 and score["kind"] == "number"
    assert score["comment"] == "graded 7" and score["source"] == "code"
    assert score["trace_id"] == root.trace_id
    assert got[(grader.span_id, "reward_hacking")]["value"] is True
    assert got[(root.span_id, "label")]["value"] == "ok"
    assert all(n["source"] == "code" for n in notes)
    assert all(n["author"]["name"] == "anyone (this server has no keys)" for n in notes)

    only = client.annotations(run.run_id, root.trace_id, span_id=grader.span_id)
    assert sorted(n["name"] for n in only) == ["reward_hacking", "score"]
    total = sum(len(client.annotations(run.run_id, r.trace_id)) for r, _ in rollouts)
    assert total == 120  # every annotation made arrived


@pytest.mark.server
def test_client_annotates_updates_and_deletes_afterwards(server, tmp_path):
    run = _run(server, tmp_path)
    with run.trace("episode", kind="rollout") as root:
        with root.span("policy", kind="model") as policy:
            pass
    assert run.finish() is True
    client = tl.Client(server.url)
    rid, tid = run.run_id, root.trace_id
    assert client.annotations(rid, tid) == []

    on_trace = client.annotate(rid, tid, name="verdict", value="reward hacking",
                               comment="passes the grader without solving")
    assert on_trace["span_id"] is None and on_trace["value"] == "reward hacking"
    assert on_trace["kind"] == "string" and on_trace["source"] == "code"
    on_span = client.annotate(rid, tid, policy.span_id, name="score", value=2)
    assert on_span["span_id"] == policy.span_id and on_span["value"] == 2

    updated = client.annotate(rid, tid, policy.span_id, name="score", value=4.5,
                              comment="on a second look")
    assert updated["value"] == 4.5 and updated["comment"] == "on a second look"
    assert updated["created_us"] == on_span["created_us"]
    assert updated["updated_us"] >= on_span["updated_us"]
    notes = client.annotations(rid, tid)
    assert [(n["span_id"], n["name"], n["value"]) for n in notes] == [
        (None, "verdict", "reward hacking"), (policy.span_id, "score", 4.5)]  # the trace's first

    assert client.delete_annotation(rid, tid, "score", span_id=policy.span_id) is True
    assert client.delete_annotation(rid, tid, "score", span_id=policy.span_id) is False
    assert [n["name"] for n in client.annotations(rid, tid)] == ["verdict"]
    assert client.annotations(rid, tid, span_id=policy.span_id) == []

    # A person labelling in a notebook says so; a source that is neither is refused.
    by_hand = client.annotate(rid, tid, name="reviewed", value=True, source="person")
    assert by_hand["source"] == "person"
    with pytest.raises(ValueError, match="source"):
        client.annotate(rid, tid, name="reviewed", value=True, source="human")
    assert [n["source"] for n in client.annotations(rid, tid)] == ["person", "code"]


@pytest.mark.server
def test_annotation_errors_from_the_server(server, tmp_path):
    run = _run(server, tmp_path)
    with run.trace("episode") as root:
        root.annotate("score", 3)
    assert run.finish() is True
    client = tl.Client(server.url)
    rid, tid = run.run_id, root.trace_id

    # One type per name in a run: a string where the run's score is a number.
    with pytest.raises(tl.ApiError) as info:
        client.annotate(rid, tid, name="score", value="high")
    err = info.value
    assert err.status == 400 and err.code == "invalid_annotation"
    assert "string" in err.message and "number" in err.message

    with pytest.raises(tl.NotFound) as info:
        client.annotate(rid, tid, "0" * 16, name="score", value=1)
    assert info.value.code == "span_not_found"
    with pytest.raises(tl.NotFound) as info:
        client.annotate(rid, "f" * 32, name="score", value=1)
    assert info.value.code == "trace_not_found"
    with pytest.raises(tl.NotFound) as info:
        client.annotations(rid, "f" * 32)
    assert info.value.code == "trace_not_found"
    with pytest.raises(ValueError, match="name"):
        client.annotate(rid, tid, name="has space", value=1)
    assert [(n["name"], n["value"]) for n in client.annotations(rid, tid)] == [("score", 3)]


@pytest.mark.server
def test_annotation_authors_and_read_keys(server_factory, tmp_path):
    from conftest import create_key
    data = tmp_path / "data"
    writer = create_key(data, "write")
    reader = create_key(data, "read")
    keyed = server_factory(data_dir=str(data)).start()
    run = tl.init("annotations-keyed", url=keyed.url, api_key=writer, finish_on_exit=False,
                  spool_dir=str(tmp_path / "spool"))
    with run.trace("episode") as root:
        root.annotate("score", 1)
    assert run.finish() is True

    client = tl.Client(keyed.url, api_key=writer)
    [note] = client.annotations(run.run_id, root.trace_id)
    assert note["author"]["key_id"] and note["source"] == "code"
    assert client.annotate(run.run_id, root.trace_id, name="score", value=2)["value"] == 2

    reading = tl.Client(keyed.url, api_key=reader)
    assert len(reading.annotations(run.run_id, root.trace_id)) == 2  # any key reads
    with pytest.raises(tl.AuthError) as info:
        reading.annotate(run.run_id, root.trace_id, name="score", value=3)
    assert info.value.status == 403
    with pytest.raises(tl.AuthError):
        reading.delete_annotation(run.run_id, root.trace_id, "score")


@pytest.mark.server
def test_annotations_travel_with_an_export_into_another_server(server, server_factory, tmp_path):
    run = _run(server, tmp_path)
    with run.trace("episode", kind="rollout") as root:
        with root.span("policy", kind="model") as policy:
            pass
    assert run.finish() is True
    source = tl.Client(server.url)
    rid, tid = run.run_id, root.trace_id
    source.annotate(rid, tid, name="label", value="reward hacking", comment="copies the prompt")
    source.annotate(rid, tid, policy.span_id, name="score", value=2)
    lines = list(source.export(rid))
    assert [line["format"] for line in lines] == \
        ["treeline.span.v1"] * 2 + ["treeline.annotation.v1"] * 2

    other = server_factory(data_dir=str(tmp_path / "other")).start()
    result = tl.import_spans(iter(lines), url=other.url)
    assert result.ok, result.problems
    assert (result.spans, result.notes) == (2, 2)
    copied = tl.Client(other.url).annotations(rid, tid)
    assert [(n["span_id"], n["name"], n["value"], n["comment"]) for n in copied] == [
        (None, "label", "reward hacking", "copies the prompt"),
        (policy.span_id, "score", 2, None),
    ]
