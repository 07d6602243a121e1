"""Against a real server: the span constructors' fields, bodies recorded late and by
kind, sessions, compression, and what is lost (or not) when the queue is full."""

import logging
import time

import pytest

import treeline as tl
from treeline import transport as transport_module

pytestmark = pytest.mark.server


def _ok(result):
    status, body = result
    assert status == 200, body
    return body


def _run(server, tmp_path, **options):
    options.setdefault("finish_on_exit", False)
    return tl.init(options.pop("project", "sdk-surface"), url=server.url,
                   spool_dir=str(tmp_path / "spool"), **options)


def _detail(server, run, span):
    return _ok(server.get("/api/runs/%s/traces/%s/spans/%s"
                          % (run.run_id, span.trace_id, span.span_id)))


def _children(server, run, span):
    return _ok(server.get("/api/runs/%s/traces/%s/spans?parent_span_id=%s"
                          % (run.run_id, span.trace_id, span.span_id)))["spans"]


def _trace(server, run, trace_id):
    return _ok(server.get("/api/runs/%s/traces/%s" % (run.run_id, trace_id)))


FIELDS = dict(step=3, rank=1, thread_id="worker-7", attributes={"k": "v"},
              inputs={"q": 1}, capture="preview", metrics={"m": 1.0})


def test_trace_span_and_start_span_take_the_same_fields(server, tmp_path):
    run = _run(server, tmp_path)
    root = run.trace("root", "agent", **FIELDS)
    with root:
        with root.span("planner", "model", **FIELDS) as planner:
            pass
        # A parent other than the span it is called on: any span of the same trace.
        with root.span("replan", "model", parent_span_id=planner.span_id, **FIELDS) as again:
            pass
        started = run.start_span("manual", "tool", parent_span_id=planner.span_id, **FIELDS)
        started.end()
        with root.child("tool", "search", **FIELDS) as search:
            pass
        with tl.tool("via module", parent=search) as via_span:
            pass
        with tl.span("via carrier", "retrieval", parent=planner.context()) as via_carrier:
            pass
    assert run.finish() is True

    assert [s["name"] for s in _children(server, run, root)] == ["planner", "search"]
    assert [s["name"] for s in _children(server, run, planner)] == [
        "replan", "manual", "via carrier"]
    assert [s["name"] for s in _children(server, run, search)] == ["via module"]
    for span in (root, planner, again, started, search):
        d = _detail(server, run, span)
        assert (d["step"], d["rank"], d["thread_id"]) == (3, 1, "worker-7")
        assert d["attributes"] == {"k": "v"} and d["input"] == {"q": 1}
        assert d["metrics"] == {"m": 1.0}
    assert _detail(server, run, via_span)["kind"] == "tool"
    assert _detail(server, run, via_carrier)["kind"] == "retrieval"


def test_input_can_be_set_until_the_close_and_kinds_have_their_own_setters(server, tmp_path):
    run = _run(server, tmp_path, capture="preview", flush_interval=30)
    with run.trace("solve", "agent") as task:
        task.task_input({"question": "17 * 23?"})
        with task.model("policy") as call:
            call.prompt([{"role": "user", "content": "17 * 23?"}])
            call.completion("391")
        with task.thought() as thought:
            thought.text("multiply first")
        with task.tool("calculator") as tool:
            tool.set_output("391")
            tool.set_input({"expression": "17 * 23"})  # after the output: still fine
        task.final_output({"answer": "391"})
    assert run.finish() is True
    assert _detail(server, run, task)["input"] == {"question": "17 * 23?"}
    assert _detail(server, run, task)["output"] == {"answer": "391"}
    d = _detail(server, run, call)
    assert d["input"] == [{"role": "user", "content": "17 * 23?"}] and d["output"] == "391"
    assert _detail(server, run, thought)["output"] == "multiply first"
    assert _detail(server, run, tool)["input"] == {"expression": "17 * 23"}


def test_an_input_recorded_after_its_open_left_rides_the_close(server, tmp_path):
    run = _run(server, tmp_path, capture="preview")
    with run.trace("long", "agent") as root:
        assert run.flush()  # the open is on the server now
        root.set_input({"late": True})
    assert run.finish() is True
    assert _detail(server, run, root)["input"] == {"late": True}


@pytest.mark.parametrize("sampled", [1.0, 0.0])
def test_a_body_recorded_twice_is_an_error_naming_span_and_body(server, tmp_path, sampled):
    run = _run(server, tmp_path, capture="preview", sample_rate=sampled)
    with run.trace("root", "agent", inputs={"task": 1}) as root:
        with pytest.raises(tl.BodyAlreadyRecorded, match=r"span 'root' \(agent.*input"):
            root.task_input({"task": 2})
        with root.model("policy", prompt="p") as call:
            with pytest.raises(ValueError, match=r"span 'policy' .*already has its input"):
                call.set_input("again")
            call.completion("c")
            with pytest.raises(ValueError, match=r"'policy' .*output.*completion"):
                call.completion("c2")
        with pytest.raises(ValueError, match=r"prompt\(\) is for model spans; span 'root'"):
            root.prompt("x")
    assert run.finish() is True
    if sampled:
        assert _detail(server, run, root)["input"] == {"task": 1}
        assert _detail(server, run, call)["output"] == "c"


def test_a_session_writes_its_childless_summary_root_on_exit(server, tmp_path):
    run = _run(server, tmp_path, capture="preview")
    with run.session("chat with user 42", attributes={"user": "u42"}) as session:
        session.set_input({"opening": "hi"})
        with run.trace("turn 1", "agent"):
            pass
        with pytest.raises(RuntimeError):
            with session.turn("turn 2", "agent"):
                raise RuntimeError("tool crashed")
        with tl.span("turn 3", "agent"):  # no parent: a new trace, so a turn
            pass
        session.set_output({"resolved": True})
    assert run.finish() is True

    traces = _ok(server.get("/api/runs/%s/traces?limit=50" % run.run_id))["traces"]
    summary = [t for t in traces if t["kind"] == "session"]
    turns = [t for t in traces if t["kind"] == "agent"]
    assert len(summary) == 1 and len(turns) == 3
    s = summary[0]
    assert s["trace_id"] == session.session_id and s["span_count"] == 1
    assert s["name"] == "chat with user 42" and s["status"] == "ok"
    assert s["attributes"]["treeline.turns"] == 3
    assert s["attributes"]["treeline.failed_turns"] == 1
    assert s["attributes"]["user"] == "u42"
    assert s["start_us"] <= min(t["start_us"] for t in turns)
    assert s["end_us"] >= max(t["end_us"] for t in turns)
    assert all(t["attributes"]["treeline.session_id"] == session.session_id for t in turns)
    root = _ok(server.get("/api/runs/%s/traces/%s/spans/%s"
                          % (run.run_id, s["trace_id"], s["root_span_id"])))
    assert root["child_count"] == 0
    assert {link["trace_id"] for link in root["links"]} == {t["trace_id"] for t in turns}
    assert root["input"] == {"opening": "hi"} and root["output"] == {"resolved": True}


def test_session_spans_cannot_be_opened_by_hand(server, tmp_path):
    run = _run(server, tmp_path)
    with run.trace("root") as root:
        for make in (lambda: run.trace("s", "session"), lambda: root.span("s", "session"),
                     lambda: run.start_span("s", "session"), lambda: tl.span("s", "session"),
                     lambda: root.child("session", "s"),
                     lambda: run.trace_op(kind="session")):
            with pytest.raises(ValueError, match="tl.session|treeline.session"):
                make()
    assert run.finish() is True
    assert _trace(server, run, root.trace_id)["span_count"] == 1


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_every_compression_reaches_the_server(server, tmp_path, compression):
    if compression == "zstd" and not transport_module.zstd_source():
        pytest.skip("no zstd here: neither Python 3.14's compression.zstd nor zstandard")
    run = _run(server, tmp_path, compression=compression)
    roots = []
    for i in range(200):  # big enough to be compressed
        with run.trace("rollout %d" % i, "rollout", step=i) as root:
            roots.append(root)
    assert run.finish() is True
    info = _ok(server.get("/api/runs/%s" % run.run_id))
    assert info["trace_count"] == 200


def test_a_full_queue_blocks_by_default_and_loses_nothing(server, tmp_path):
    # A queue far smaller than what the loop makes: the loop waits for the sender.
    run = _run(server, tmp_path, max_queue_bytes=30000, batch_bytes=8000)
    for i in range(100):
        with run.trace("rollout %d" % i, "rollout", step=i) as root:
            for j in range(9):
                with root.span("step %d" % j, "env_step"):
                    pass
        run.log_metrics({"loss": 1.0}, step=i)
    assert run.finish() is True
    c = run.counters()
    assert c["dropped_spans"] == 0 and c["dropped_points"] == 0
    assert c["blocked_seconds"] > 0
    traces = _ok(server.get("/api/runs/%s/traces?limit=500" % run.run_id))["traces"]
    assert len(traces) == 100 and all(t["span_count"] == 10 for t in traces)
    assert all("treeline.dropped_spans" not in t["attributes"] for t in traces)
    series = _ok(server.get("/api/runs/%s/metrics?key=loss" % run.run_id))
    assert len(series["points"]) == 100


def test_a_trace_that_lost_spans_says_how_many_on_its_root(server, tmp_path, caplog):
    run = _run(server, tmp_path, max_queue_bytes=20000, flush_interval=30,
               batch_bytes=1 << 30, on_full="drop")
    with caplog.at_level(logging.WARNING, logger="treeline"):
        with run.trace("big rollout", "rollout") as root:
            kept = 0
            for j in range(300):
                with root.span("step %d" % j, "env_step") as step:
                    with step.span("policy", "model") as policy:  # lost with its parent
                        pass
                    kept += step.is_recording + policy.is_recording
        run.log_metrics({"loss": 1.0}, step=0)
    assert run.finish() is True
    c = run.counters()
    lost = 600 - kept
    assert kept > 0 and c["dropped_spans"] == lost and c["dropped_points"] == 1
    assert "queue full" in caplog.text
    t = _trace(server, run, root.trace_id)
    assert t["attributes"]["treeline.dropped_spans"] == lost
    assert t["span_count"] == 1 + kept


def test_a_wedged_sender_does_not_hang_the_loop(tmp_path, caplog):
    import threading

    gate = threading.Event()

    class Stuck:
        url = "stuck://"

        def send(self, *a, **kw):
            gate.wait(20)
            return 200, {"accepted": 0, "rejected": [], "warnings": []}

    run = tl.init("p", transport=Stuck(), spool_dir=str(tmp_path), finish_on_exit=False,
                  max_queue_bytes=5000, batch_bytes=1000, block_timeout=0.3)
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="treeline"):
        for i in range(200):
            with run.trace("r%d" % i):
                pass
    assert time.monotonic() - start < 5  # one timed-out wait, then drops until drained
    c = run.counters()
    assert c["block_timeouts"] == 1 and c["dropped_spans"] > 0
    assert "stayed full" in caplog.text
    gate.set()
    run.flush(10)


def test_the_first_256_attributes_in_the_order_they_were_set_are_kept(server, tmp_path):
    run = _run(server, tmp_path)
    names = ["z%03d" % i for i in range(300, 0, -1)]  # set in reverse name order
    with run.trace("many") as root:
        for name in names:
            root.set_attribute(name, 1)
    assert run.finish() is True
    kept = _detail(server, run, root)["attributes"]
    assert set(kept) == set(names[:256])  # not the 256 that sort first
    assert run.counters()["dropped_attributes"] == 44
    assert run.counters()["server_warnings"] == 0


def test_server_warnings_are_logged_once_per_kind_and_counted(server, tmp_path, caplog):
    run = _run(server, tmp_path)
    with run.trace("root") as root:
        pass
    assert run.flush()
    # The same open again, as a re-sent batch would carry it: the server keeps the
    # first and answers a warning.
    repeat = {"op": "open", "trace_id": root.trace_id, "span_id": root.span_id,
              "name": "root", "kind": "custom", "ts": 1}
    with caplog.at_level(logging.WARNING, logger="treeline"):
        for _ in range(3):
            run._sender.put(dict(repeat), 100)
            assert run.flush()
    assert run.finish() is True
    assert run.counters()["server_warnings"] == 3
    assert caplog.text.count("was already opened") == 1
