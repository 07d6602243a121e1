"""Without a server: span events written as JSON text carry every field intact, and an
event with no UTF-8 form costs only itself."""

import importlib
import json

AWKWARD = 'say "hi"\\ now\n\ttab é ✓ \u2028 \x01'


def test_every_field_survives_the_text_form(make_run, transport):
    run = make_run(capture="preview", flush_interval=30)
    with run.trace(AWKWARD, "agent", step=7, rank=2, thread_id='th"read',
                   attributes={"reward": 0.5, "tag": AWKWARD, "n": -3}) as root:
        root.set_input({"task": AWKWARD})
        with root.span("child", "tool", inputs=[1, 2.5]) as child:
            child.set_output({"ok": True, "text": AWKWARD})
            child.set_attribute("late", AWKWARD)
            child.log_metric("latency_ms", 3.25)
            child.token_count = 12
        try:
            with root.span("fails", "tool"):
                raise ValueError(AWKWARD)
        except ValueError:
            pass
    run.flush()
    opened = transport.opens()
    assert opened[root.span_id]["name"] == AWKWARD
    assert opened[root.span_id]["thread_id"] == 'th"read'
    assert opened[root.span_id]["step"] == 7 and opened[root.span_id]["rank"] == 2
    assert opened[root.span_id]["parent_span_id"] is None
    assert opened[root.span_id]["attributes"] == {"reward": 0.5, "tag": AWKWARD, "n": -3}
    assert opened[root.span_id]["input"] == {"task": AWKWARD}  # patched into the waiting open
    assert opened[child.span_id]["parent_span_id"] == root.span_id
    assert opened[child.span_id]["ordinal"] == 0 and opened[child.span_id]["input"] == [1, 2.5]
    closed = transport.closes()
    assert closed[child.span_id]["output"] == {"ok": True, "text": AWKWARD}
    assert closed[child.span_id]["attributes"] == {"late": AWKWARD}
    assert closed[child.span_id]["metrics"] == {"latency_ms": 3.25}
    assert closed[child.span_id]["token_count"] == 12
    failed = [e for e in closed.values() if e["status"] == "error"]
    error = failed[0]["error"]
    assert (error["type"], error["message"]) == ("ValueError", AWKWARD)
    assert error["traceback"].endswith("ValueError: %s\n" % AWKWARD)


def test_a_name_with_no_utf8_form_loses_only_its_own_events(make_run, transport):
    run = make_run(flush_interval=30)
    with run.trace("root") as root:
        with root.span("lone \ud800 surrogate"):
            pass
        with root.span("fine"):
            pass
    run.flush()
    names = sorted(e["name"] for e in transport.opens().values())
    assert names == ["fine", "root"]
    assert len(transport.closes()) == 3  # its close names no text: it still goes
    assert run.counters()["rejected"] == 1


def test_the_batch_body_is_one_json_document(make_run, transport):
    run = make_run(compression="none", flush_interval=30)
    for i in range(3):
        with run.trace("t%d" % i):
            pass
    run.flush()
    bodies = [r["body"] for r in transport.sent if r["path"].endswith("/traces/events")]
    assert sum(len(b["events"]) for b in bodies) == 6
    assert json.loads(json.dumps(bodies)) == bodies


def test_names_a_loop_makes_up_do_not_grow_the_cache_without_bound(make_run, transport):
    from treeline import eventtext

    run = make_run(flush_interval=30)
    for i in range(eventtext._MAX_NAMES + 100):
        run.trace("step %d" % i).start().end()
    run.flush()
    assert len(eventtext._names) <= eventtext._MAX_NAMES
    assert len(transport.opens()) == eventtext._MAX_NAMES + 100


def test_an_open_not_written_as_text_still_goes_and_a_late_input_rides_the_close(
        make_run, transport, monkeypatch):
    span_module = importlib.import_module("treeline.span")  # tl.span is a function

    def refuse(span, ts):
        raise ValueError("no JSON form")

    monkeypatch.setattr(span_module, "open_text", refuse)
    run = make_run(capture="preview", flush_interval=30)
    with run.trace("root", "agent") as root:
        root.set_input({"task": "late"})
    run.flush()
    assert transport.opens()[root.span_id]["name"] == "root"
    assert "input" not in transport.opens()[root.span_id]
    assert transport.closes()[root.span_id]["input"] == {"task": "late"}
