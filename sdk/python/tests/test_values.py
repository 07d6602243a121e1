"""A value a tracing call cannot store as given never raises into the training loop: it
is flattened, written as text, cut or dropped, said once per run and kind, and
counted in run.counters()."""

import logging

import treeline as tl


def _said(caplog, text):
    return [r for r in caplog.records if text in r.getMessage()]


def test_a_nested_mapping_becomes_dotted_names(make_run, transport, caplog):
    run = make_run()
    with run.trace("x", attributes={"model": {"name": "gpt", "layers": {"n": 12}}}) as span:
        span.set_attribute("sampling", {"temperature": 1.0, "top": {"p": 0.9, "k": 40}})
        span.set_attributes({"optimizer": {"lr": 3e-4}, "seed": 1})
    run.flush()
    assert transport.opens()[span.span_id]["attributes"] == {
        "model.name": "gpt", "model.layers.n": 12}
    assert transport.closes()[span.span_id]["attributes"] == {
        "sampling.temperature": 1.0, "sampling.top.p": 0.9, "sampling.top.k": 40,
        "optimizer.lr": 3e-4, "seed": 1}
    assert run.counters()["converted_attributes"] == 3  # one per mapping given
    assert len(_said(caplog, "is a mapping: stored as dotted names")) == 1


def test_flattening_keeps_the_attribute_cap_and_the_name_cap(make_run, transport):
    run = make_run()
    loop = {"ok": 1}
    loop["again"] = loop  # a mapping that holds itself ends at the name cap
    with run.trace("x") as span:
        span.set_attribute("wide", {"k%03d" % i: i for i in range(300)})
        span.set_attribute("a" * 200, {"b" * 100: 1})
        span.set_attribute("loop", loop)
    run.flush()
    attrs = transport.closes()[span.span_id]["attributes"]
    assert len(attrs) == 256 and "wide.k255" in attrs and "wide.k256" not in attrs
    assert not any(name.startswith("a" * 200) for name in attrs)
    assert all(len(name.encode()) <= 256 for name in attrs)
    # 44 past the cap, one name over 256 bytes, and the loop's values (all past the cap).
    assert run.counters()["dropped_attributes"] >= 44 + 1


def test_lists_and_other_types_become_text(make_run, transport, caplog):
    class Thing:
        def __repr__(self):
            return "<Thing 7>"

    run = make_run()
    with run.trace("x") as span:
        span.set_attribute("ids", [1, 2, 3])
        span.set_attribute("mixed", ("a", 2.5, None))
        span.set_attribute("tags", ["a", "b"])  # all strings: stays a list
        span.set_attribute("thing", Thing())
        span.set_attribute("nothing", None)
        span.set_attribute("raw", b"\x00\x01")
    run.flush()
    attrs = transport.closes()[span.span_id]["attributes"]
    assert attrs == {"ids": "[1, 2, 3]", "mixed": '["a", 2.5, null]', "tags": ["a", "b"],
                     "thing": "<Thing 7>", "nothing": "None", "raw": "b'\\x00\\x01'"}
    assert run.counters()["converted_attributes"] == 5
    assert len(_said(caplog, "is a list that is not all strings")) == 1
    assert len(_said(caplog, "stored as its repr")) == 1


def test_nan_and_infinity_are_dropped_and_counted(make_run, transport, caplog):
    run = make_run()
    with run.trace("x", attributes={"inf": float("inf"), "ok": 1.5}) as span:
        span.set_attribute("loss", float("nan"))
        span.set_attribute("cfg", {"eps": float("-inf"), "lr": 0.1})
    run.log_metrics({"reward": float("nan")}, step=0)
    run.flush()
    assert transport.opens()[span.span_id]["attributes"] == {"ok": 1.5}
    assert transport.closes()[span.span_id]["attributes"] == {"cfg.lr": 0.1}
    assert run.counters()["dropped_values"] == 4
    assert len(_said(caplog, "JSON has no NaN or infinity")) == 2  # attributes, metrics


def test_an_oversized_string_is_cut_with_a_marker_the_dashboard_shows(make_run, transport):
    run = make_run()
    with run.trace("x") as span:
        span.set_attribute("doc", "é" * 2_000_000)
        span.set_attribute("lines", ["line %d" % i for i in range(20000)])
    run.flush()
    attrs = transport.closes()[span.span_id]["attributes"]
    assert attrs["doc"].endswith("é… [cut from 2,000,000 characters]")
    assert len(attrs["doc"].encode()) <= 64 * 1024
    assert attrs["lines"][-1] == "… [cut from 20,000 items]"
    assert sum(len(s.encode()) for s in attrs["lines"]) <= 64 * 1024
    assert run.counters()["cut_attributes"] == 2


def test_names_that_cannot_be_used_are_dropped_not_raised(make_run, transport, caplog):
    run = make_run()
    with run.trace("x", attributes={5: "five", "status": "done", "": 1, "kept": 1}) as span:
        span.set_attribute(None, 1)
        span.set_attribute(("a", "b"), 1)
        span.set_attribute("cfg", {1: "int key", "ok": True})
        span.set_attributes("not a mapping")
    run.flush()
    assert transport.opens()[span.span_id]["attributes"] == {"kept": 1}
    assert transport.closes()[span.span_id]["attributes"] == {"cfg.ok": True}
    assert run.counters()["dropped_attributes"] == 7
    assert len(_said(caplog, "is a span field, not an attribute")) == 1


def test_ambient_decorator_session_and_inert_spans_never_raise(make_run, transport):
    run = make_run(sample_rate=1.0)

    @run.trace_op(attributes={"cfg": {"k": 2}, "bad": float("nan")})
    def step():
        return 1

    with tl.attributes({"cfg": {"a": 1}, 3: "x"}):
        with run.trace("x") as span:
            step()
    with run.session("s", attributes={"user": {"id": 42}}) as session:
        session.set_attribute("turn", {"n": 1})
    inert = make_run(sample_rate=0.0)
    with inert.trace("y", attributes={"a": object()}) as noop:
        noop.set_attribute("b", {"c": float("nan")}).set_attribute(7, [1, object()])
    run.flush()
    opens = transport.opens()
    assert opens[span.span_id]["attributes"] == {"cfg.a": 1}
    (traced,) = [e for e in opens.values() if e["name"].endswith(".step")]
    assert traced["attributes"] == {"cfg.a": 1, "cfg.k": 2}
    (summary,) = [e for e in opens.values() if e["name"] == "s"]
    assert summary["attributes"]["user.id"] == 42
    assert transport.closes()[summary["span_id"]]["attributes"]["turn.n"] == 1


def test_each_kind_of_change_is_said_once_per_run(make_run, caplog):
    caplog.set_level(logging.WARNING, logger="treeline")
    run = make_run()
    for i in range(5):
        with run.trace("x") as span:
            span.set_attribute("loss", float("nan"))
            span.set_attribute("ids", [i, i + 1])
    assert run.counters()["dropped_values"] == 5 and run.counters()["converted_attributes"] == 5
    assert len(_said(caplog, "attribute 'loss' is nan")) == 1
    assert len(_said(caplog, "attribute 'ids' is a list")) == 1
