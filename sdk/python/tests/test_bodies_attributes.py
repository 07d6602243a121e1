"""Without a server: where a late input goes, the attribute count, compression choice,
and the options' checks."""

import pytest

import treeline as tl
from treeline import transport as transport_module
from treeline.delivery import warning_kind


def test_an_input_set_while_the_open_waits_rides_the_open(make_run, transport):
    run = make_run(capture="preview", flush_interval=30)
    with run.trace("root", "agent") as root:
        root.set_input({"task": "late but in time"})
    run.flush()
    assert transport.opens()[root.span_id]["input"] == {"task": "late but in time"}
    assert "input" not in transport.closes()[root.span_id]


def test_an_input_set_after_the_open_left_goes_on_the_close(make_run, transport):
    run = make_run(capture="preview")
    with run.trace("root", "agent") as root:
        run.flush()
        root.set_input("after")
    run.flush()
    assert "input" not in transport.opens()[root.span_id]
    assert transport.closes()[root.span_id]["input"] == "after"


def test_capture_off_sends_no_body_but_still_refuses_a_second_one(make_run, transport):
    run = make_run()
    with run.trace("root", "model") as root:
        root.prompt("secret prompt")
        with pytest.raises(tl.BodyAlreadyRecorded):
            root.set_input("again")
    run.flush()
    assert "input" not in transport.opens()[root.span_id]
    assert "secret prompt" not in repr(transport.sent)


def test_a_name_set_on_open_and_close_counts_once(make_run, transport):
    run = make_run()
    with tl.attributes({"ambient": 1}):
        span = run.trace("root", attributes={"a%03d" % i: i for i in range(199)})
    with span:
        for i in range(10):
            span.set_attribute("a%03d" % i, -i)  # already set on the open
        for i in range(56):
            span.set_attribute("b%03d" % i, i)  # 200 + 56 = 256 distinct names
        span.set_attribute("b000", 99)  # set twice on the close: still one name
        span.set_attribute("one too many", 1)
    run.flush()
    opened, closed = transport.opens()[span.span_id], transport.closes()[span.span_id]
    assert len(opened["attributes"]) == 200
    assert len(closed["attributes"]) == 66 and "one too many" not in closed["attributes"]
    assert closed["attributes"]["a000"] == 0 and closed["attributes"]["b000"] == 99
    assert run.counters()["dropped_attributes"] == 1


def test_attributes_past_256_on_the_open_keep_the_first_set(make_run, transport):
    run = make_run()
    names = ["n%03d" % i for i in range(300, 0, -1)]
    with run.trace("root", attributes={n: 1 for n in names}) as root:
        pass
    run.flush()
    assert list(transport.opens()[root.span_id]["attributes"]) == names[:256]
    assert run.counters()["dropped_attributes"] == 44


def test_compression_prefers_the_standard_library_then_zstandard_then_gzip(monkeypatch):
    monkeypatch.setattr(transport_module, "_std_zstd", object())
    assert transport_module.pick_encoding() == "zstd"
    assert tl.compression() == "zstd (compression.zstd)"
    monkeypatch.setattr(transport_module, "_std_zstd", None)
    monkeypatch.setattr(transport_module, "_zstd", object())
    assert tl.compression() == "zstd (zstandard)"
    monkeypatch.setattr(transport_module, "_zstd", None)
    assert transport_module.pick_encoding() == "gzip" and tl.compression() == "gzip"
    with pytest.raises(ValueError, match="compression.zstd.*zstandard"):
        transport_module.pick_encoding("zstd")


def test_options_are_checked(make_run):
    with pytest.raises(ValueError, match="on_full 'wait' is not valid; valid values are: "
                                         "block, drop"):
        make_run(on_full="wait")
    with pytest.raises(ValueError, match="compression must be one of"):
        make_run(compression="brotli")


def test_warning_kinds_ignore_ids_and_numbers():
    assert warning_kind("span 00f0 was already opened; this open was ignored") == \
        warning_kind("span a1b2 was already opened; this open was ignored")
    assert warning_kind("12 attributes past the first 256 were dropped") == \
        warning_kind("3 attributes past the first 256 were dropped")
    assert warning_kind("attributes.status was dropped: status is a span field") == \
        warning_kind("attributes.kind was dropped: kind is a span field")
    assert warning_kind("span 00f0 was already opened") != \
        warning_kind("span 00f0 was already closed")


def test_inert_spans_have_the_new_surface(tmp_path):
    run = tl.init("p", disabled=True)
    with run.session("s") as session:
        with run.trace("t", "agent", inputs={"q": 1}) as t:
            with t.child("model", "m") as m:
                m.prompt("p").completion("c")
            with pytest.raises(tl.BodyAlreadyRecorded):
                t.task_input({"q": 2})
            t.final_output("done")
            t.span("x", parent_span_id="00f067aa0ba902b7").text  # exists, inert
    assert not session.is_recording and not t.is_recording
    assert run.counters()["dropped_spans"] == 0


def test_a_traced_function_that_records_its_own_output_keeps_it(make_run, transport):
    run = make_run(capture="preview")

    @run.trace_op(kind="tool")
    def search(q):
        tl.current_span().set_output({"hits": 2})
        return ["a", "b"]

    assert search("x") == ["a", "b"]
    run.flush()
    (close,) = transport.closes().values()
    assert close["output"] == {"hits": 2}


def test_parent_must_be_a_span_or_a_carrier(make_run):
    make_run()
    with pytest.raises(TypeError, match="parent= takes a span or a carrier"):
        tl.span("x", parent="00f067aa0ba902b7")


BIG = "x" * 2_000_000


def test_a_body_the_preview_cut_is_flagged_on_the_event_that_carries_it(make_run, transport):
    run = make_run(capture="preview", flush_interval=30)
    with run.trace("root", "agent", inputs={"doc": BIG}) as root:  # on the open
        root.set_output(BIG)  # on the close
        with root.span("waiting", "tool") as waiting:
            waiting.set_input(BIG)  # patched into the open while it waits
        with root.span("many", "tool", inputs=list(range(500))) as many:  # items left out
            pass
        with root.span("small", "tool", inputs={"q": 1}) as small:
            small.set_output({"a": 1})
        run.flush()
        root.set_attribute("after", 1)
    with run.trace("late", "agent") as late:
        run.flush()
        late.set_input(BIG)  # the open has left: rides the close
    run.flush()
    opens, closes = transport.opens(), transport.closes()
    assert opens[root.span_id]["input_truncated"] is True
    assert closes[root.span_id]["output_truncated"] is True
    assert opens[waiting.span_id]["input_truncated"] is True
    assert opens[many.span_id]["input_truncated"] is True
    assert closes[late.span_id]["input_truncated"] is True
    assert "input_truncated" not in opens[late.span_id]
    assert "input_truncated" not in opens[small.span_id]
    assert "output_truncated" not in closes[small.span_id]
    assert len(closes[root.span_id]["output"]) <= 8192 + 1


def _fail(depth):
    """Raises from `depth` alternating frames down (distinct frames, so Python does
    not fold them into "[Previous line repeated]")."""
    if depth == 0:
        raise ValueError("bad obs, key sk-live-abcdefghijklmnop")
    return _fail_too(depth - 1)


def _fail_too(depth):
    return _fail(depth)


def test_a_failure_keeps_its_traceback_under_preview_innermost_frames_first(make_run,
                                                                           transport):
    run = make_run(capture="preview")
    for name, depth, capture in (("shallow", 0, None), ("deep", 400, None),
                                 ("off", 0, "off")):
        try:
            with run.trace(name, "tool", capture=capture):
                _fail(depth)
        except ValueError:
            pass
    run.flush()
    errors = {e["span_id"]: e["error"] for e in transport.closes().values()}
    by_name = {e["name"]: errors[e["span_id"]] for e in transport.opens().values()}
    shallow = by_name["shallow"]
    assert shallow["traceback"].startswith("Traceback (most recent call last):")
    assert ", in _fail\n" in shallow["traceback"]
    assert shallow["traceback"].endswith("ValueError: bad obs, key [REDACTED]\n")
    assert "sk-live" not in str(shallow)
    deep = by_name["deep"]["traceback"]
    assert deep.startswith("… [traceback cut from ") and len(deep) <= 8192
    assert deep.endswith("ValueError: bad obs, key [REDACTED]\n")  # the innermost end
    assert "test_a_failure_keeps" not in deep  # the outermost frame was cut
    assert by_name["off"] == {"type": "ValueError"}
    never_raised = run.start_span("recorded by hand").record_exception(ValueError("x"))
    never_raised.end("error")
    run.flush()
    assert transport.closes()[never_raised.span_id]["error"] == {"type": "ValueError",
                                                                 "message": "x"}
