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
