"""Programming errors (a kind, a status, a step) raise in the caller's code, whatever
sampling decided; values recorded (attributes, metrics) never do."""

import json
import pathlib

import pytest

import treeline as tl
from treeline import attrs, vocab

# The contract crate's own vocabularies and limits (wire/src/contract.rs keeps it).
CONTRACT = json.loads((pathlib.Path(__file__).resolve().parents[3] / "wire" / "contract.json")
                      .read_text())


def test_vocabularies_and_limits_are_the_contract_crates():
    assert set(tl.KINDS) == set(CONTRACT["span_kinds"])
    assert set(vocab.SPAN_STATUSES) == set(CONTRACT["close_statuses"])
    assert set(vocab.RUN_STATUSES) == set(CONTRACT["finish_statuses"])
    assert attrs.RESERVED_ATTRIBUTES == frozenset(CONTRACT["reserved_attributes"])
    assert attrs.MAX_ATTRIBUTES == CONTRACT["max_attributes"]
    assert attrs.MAX_VALUE_BYTES == CONTRACT["max_attribute_bytes"]
    assert attrs.MAX_NAME_BYTES == CONTRACT["max_attribute_name_bytes"]


def test_unknown_kind_raises_and_names_the_valid_ones(make_run):
    run = make_run()
    with pytest.raises(ValueError) as err:
        run.trace("x", kind="llm")
    for kind in tl.KINDS:
        assert kind in str(err.value)
    with run.trace("root") as root:
        with pytest.raises(ValueError):
            root.span("x", kind="LLM")
    with pytest.raises(ValueError):
        run.start_span("x", kind="nope")
    with pytest.raises(ValueError):
        run.trace_op(kind="nope")


def test_bad_kind_raises_even_when_the_root_is_not_sampled(make_run):
    run = make_run(sample_rate=0.0)
    with pytest.raises(ValueError):
        run.trace("x", kind="bogus")
    with run.trace("x") as root:
        with pytest.raises(ValueError):
            root.span("y", kind="bogus")


def test_bad_kind_raises_when_disabled(make_run):
    run = make_run(disabled=True)
    with pytest.raises(ValueError):
        run.trace("x", kind="bogus")


@pytest.mark.parametrize("name", ["status", "step", "kind", "name", "trace_id", "span_id",
                                  "token_count", "input", "output"])
def test_reserved_attribute_names_are_dropped_not_raised(make_run, transport, name):
    run = make_run()
    with run.trace("x", attributes={name: 1, "kept": 1}) as span:
        span.set_attribute(name, "v")
        with tl.attributes({name: 1}):
            pass
    run.flush()
    assert transport.opens()[span.span_id]["attributes"] == {"kept": 1}
    assert "attributes" not in transport.closes()[span.span_id]
    assert run.counters()["dropped_attributes"] == 3


def test_allowed_attribute_values_pass(make_run, transport):
    run = make_run()
    with run.trace("x", attributes={"b": True, "i": 3, "f": 0.5, "s": "x", "l": ["a", "b"],
                                    "t": ("c",)}) as span:
        span.set_attribute("nan", float("nan"))
        span.set_attribute("long", "x" * 70000)
    run.flush()
    ev = list(transport.opens().values())[0]
    assert ev["attributes"]["l"] == ["a", "b"] and ev["attributes"]["t"] == ["c"]
    close = list(transport.closes().values())[0]
    assert "nan" not in close["attributes"]  # dropped: a string here would split the key
    assert len(close["attributes"]["long"].encode()) <= 64 * 1024


def test_status_step_and_capture_are_checked(make_run):
    run = make_run()
    span = run.start_span("x")
    with pytest.raises(ValueError):
        span.end("running")
    with pytest.raises(ValueError):
        span.end("completed")
    span.end("cancelled")
    with pytest.raises(ValueError):
        run.trace("x", step=-1)
    with pytest.raises(TypeError):
        run.trace("x", step="3")
    with pytest.raises(ValueError):
        run.trace("x", capture="full")
    with pytest.raises(ValueError):
        run.finish("done")
    with pytest.raises(ValueError):
        tl.init("")
    with pytest.raises(ValueError):
        tl.init("p", run_id="has space")


def test_metric_values_that_are_not_numbers_are_dropped_and_counted(make_run, transport):
    run = make_run()
    run.log_metrics({"loss": "high", "": 1.0, "none": None}, step=1)
    run.log_metrics({"ok": 1, "nan": float("nan"), "inf": float("inf"), "flag": True}, step=2)
    with run.trace("x") as span:
        span.log_metric("latency", "slow").log_metric("ms", float("-inf")).log_metric(3, 1.0)
    run.flush()
    assert {(p["key"], p["value"]) for p in transport.points()} == {("ok", 1), ("flag", 1.0)}
    assert "metrics" not in transport.closes()[span.span_id]
    assert run.counters()["dropped_values"] == 8
