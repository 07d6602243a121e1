"""What spans send: opens on entry, closes on exit, nesting, bodies, errors."""

import asyncio
import threading
import time

import pytest

import treeline as tl


def test_open_is_sent_while_the_span_runs(make_run, transport):
    run = make_run()
    with run.trace("rollout 1", kind="rollout", step=4, attributes={"env": "cp"}) as root:
        assert run.flush(5)
        opens = transport.opens()
        assert root.span_id in opens and not transport.closes()
        ev = opens[root.span_id]
        assert ev["name"] == "rollout 1" and ev["kind"] == "rollout" and ev["step"] == 4
        assert ev["parent_span_id"] is None and ev["attributes"] == {"env": "cp"}
        assert len(ev["trace_id"]) == 32 and len(ev["span_id"]) == 16
        assert ev["thread_id"] == threading.current_thread().name
    run.flush(5)
    close = transport.closes()[root.span_id]
    assert close["status"] == "ok" and close["ts"] >= ev["ts"]


def test_trace_ids_rise_with_time_and_differ(make_run):
    run = make_run()
    first = [run.trace("a").trace_id for _ in range(200)]
    time.sleep(0.002)
    later = run.trace("b").trace_id
    assert len(set(first)) == 200
    assert all(len(t) == 32 and int(t, 16) for t in first + [later])
    assert later > max(first)  # a later millisecond sorts after every earlier id


def test_children_nest_and_inherit(make_run, transport):
    run = make_run(rank=2)
    with run.trace("root", kind="rollout", step=7) as root:
        with root.span("policy", kind="model") as child:
            with child.span("inner") as grandchild:
                pass
        with run.model("helper-model") as via_run:  # nests under the active span
            pass
    run.flush()
    opens = transport.opens()
    assert opens[child.span_id]["parent_span_id"] == root.span_id
    assert opens[grandchild.span_id]["parent_span_id"] == child.span_id
    assert opens[via_run.span_id]["parent_span_id"] == root.span_id
    assert opens[via_run.span_id]["kind"] == "model"
    for sid in (child.span_id, grandchild.span_id):
        assert opens[sid]["trace_id"] == root.trace_id
        assert opens[sid]["step"] == 7 and opens[sid]["rank"] == 2
    # a close never overtakes its open, and children close before parents
    order = [(e["op"], e["span_id"]) for e in transport.events()]
    assert order.index(("open", child.span_id)) < order.index(("close", child.span_id))
    assert order.index(("close", grandchild.span_id)) < order.index(("close", root.span_id))


def test_closes_carry_what_the_span_recorded(make_run, transport):
    run = make_run()
    other = run.start_span("other")
    other.end()
    with run.trace("root", capture="preview") as root:
        root.set_output({"action": 1})
        root.set_attributes({"hits": 3, "tags": ["a"]})
        root.log_metric("reward", 1.5)
        root.token_count = 12
        root.add_link(other)
    run.flush()
    close = transport.closes()[root.span_id]
    assert close["output"] == {"action": 1}
    assert close["attributes"] == {"hits": 3, "tags": ["a"]}
    assert close["metrics"] == {"reward": 1.5}
    assert close["token_count"] == 12
    assert close["links"] == [{"trace_id": other.trace_id, "span_id": other.span_id}]


def test_capture_off_is_the_default_and_sends_no_bodies(make_run, transport):
    run = make_run()
    with pytest.raises(ValueError):
        with run.trace("root", inputs={"prompt": "private"}) as root:
            root.set_output("private answer")
            raise ValueError("private message")
    run.flush()
    opened, closed = transport.opens()[root.span_id], transport.closes()[root.span_id]
    assert "input" not in opened and "output" not in closed
    assert closed["status"] == "error"
    assert closed["error"] == {"type": "ValueError"}  # no message without preview


def test_preview_records_bodies_and_the_message(make_run, transport):
    run = make_run()
    with pytest.raises(KeyError):
        with run.trace("root", inputs={"q": "x", "api_key": "k"}, capture="preview") as root:
            with root.span("child") as child:  # capture is inherited
                child.set_output("answer")
            raise KeyError("password=hunter2")
    run.flush()
    assert transport.opens()[root.span_id]["input"] == {"q": "x", "api_key": "[REDACTED]"}
    assert transport.closes()[child.span_id]["output"] == "answer"
    err = transport.closes()[root.span_id]["error"]
    assert err["type"] == "KeyError" and "hunter2" not in err["message"]
    assert "[REDACTED]" in err["message"]


def test_a_value_with_no_json_form_gets_serialization_error(make_run, transport):
    run = make_run()
    with run.trace("root", inputs={(1, 2): "x"}, capture="preview") as root:
        root.set_output(object())
    run.flush()
    opened, closed = transport.opens()[root.span_id], transport.closes()[root.span_id]
    assert isinstance(opened["input"], str) and "serialization_error" in opened["attributes"]
    assert isinstance(closed["output"], str) and "serialization_error" in closed["attributes"]


def test_manual_lifecycle_and_explicit_parent(make_run, transport):
    run = make_run()
    root = run.start_span("root", kind="agent")
    child = run.start_span("child", kind="tool", parent_span_id=root.span_id)
    remote = run.start_span("elsewhere", parent_span_id="00f067aa0ba902b7",
                            trace_id="4bf92f3577b34da6a3ce929d0e0e4736")
    with pytest.raises(ValueError):
        run.start_span("orphan", parent_span_id="00f067aa0ba902b7")
    child.end("truncated")
    remote.end()
    root.end("cancelled")
    root.end("ok")  # a second end is ignored
    run.flush()
    assert transport.opens()[child.span_id]["parent_span_id"] == root.span_id
    assert transport.opens()[remote.span_id]["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert transport.closes()[child.span_id]["status"] == "truncated"
    assert transport.closes()[root.span_id]["status"] == "cancelled"
    assert sum(1 for e in transport.events() if e["op"] == "close"
               and e["span_id"] == root.span_id) == 1


def test_set_status_and_base_exceptions(make_run, transport):
    run = make_run()
    with run.trace("cut") as cut:
        cut.set_status("truncated")
    with pytest.raises(KeyboardInterrupt):
        with run.trace("ctrl-c"):
            raise KeyboardInterrupt

    async def cancelled():
        with run.trace("task") as span:
            await asyncio.sleep(10)
        return span

    async def main():
        task = asyncio.ensure_future(cancelled())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    run.flush()
    statuses = {transport.opens()[sid]["name"]: c["status"] for sid, c in transport.closes().items()}
    assert statuses == {"cut": "truncated", "ctrl-c": "interrupted", "task": "cancelled"}


def test_kind_named_helpers(make_run, transport):
    run = make_run(capture="preview")
    with run.agent("rollout", inputs={"task": "t"}) as agent:
        with agent.iteration() as it:
            with it.thought(text="look it up"):
                pass
            with it.model("policy", prompt=[{"role": "user", "content": "hi"}]) as llm:
                llm.set_output("hello")
            with tl.tool("search", inputs={"q": "spiders"}) as tool:  # module-level helper
                tool.set_output(["a"])
    run.flush()
    kinds = {e["name"]: (e["kind"], e["parent_span_id"]) for e in transport.opens().values()}
    assert kinds["rollout"] == ("agent", None)
    assert kinds["iteration"] == ("iteration", agent.span_id)
    assert kinds["thought"] == ("thought", it.span_id)
    assert kinds["policy"] == ("model", it.span_id)
    assert kinds["search"] == ("tool", it.span_id)
    assert transport.opens()[llm.span_id]["input"] == [{"role": "user", "content": "hi"}]


def test_ambient_step_and_attributes(make_run, transport):
    run = make_run()
    with tl.step(9), tl.attributes({"sample": 1, "split": "train"}):
        with tl.attributes({"split": "val"}):
            assert tl.current_attributes() == {"sample": 1, "split": "val"}
            with run.trace("root", attributes={"sample": 2}) as root:
                pass
        run.log_metrics({"loss": 1.0})
    run.log_metrics({"loss": 2.0})
    run.flush()
    ev = transport.opens()[root.span_id]
    assert ev["step"] == 9 and ev["attributes"] == {"sample": 2, "split": "val"}
    assert [p["step"] for p in transport.points()] == [9, 10]


def test_current_span_is_per_thread_and_per_task(make_run, transport):
    run = make_run()
    seen = {}

    def worker():
        seen["thread"] = tl.current_span()

    async def task(i):
        with run.trace("task %d" % i) as root:
            await asyncio.sleep(0.01 * (3 - i))
            with run.span("child %d" % i) as child:
                await asyncio.sleep(0)
            return root.span_id, child.span_id

    with run.trace("main"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()

    async def main():
        return await asyncio.gather(*(task(i) for i in range(3)))

    pairs = asyncio.run(main())
    run.flush()
    assert seen["thread"] is None
    opens = transport.opens()
    for root_id, child_id in pairs:
        assert opens[child_id]["parent_span_id"] == root_id
    assert tl.current_span() is None
