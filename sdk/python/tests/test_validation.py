"""Programming errors raise in the caller's code, whatever sampling decided."""

import pytest

import treeline as tl


def test_kind_vocabulary_matches_the_contract():
    assert len(tl.KINDS) == 19
    assert {"rollout", "env_step", "model", "tool", "thought", "agent", "iteration",
            "function", "session", "custom"} <= set(tl.KINDS)


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
def test_reserved_attribute_names_raise(make_run, name):
    run = make_run()
    with pytest.raises(ValueError, match="span field"):
        run.trace("x", attributes={name: 1})
    with run.trace("x") as span:
        with pytest.raises(ValueError):
            span.set_attribute(name, "v")
    with pytest.raises(ValueError):
        with tl.attributes({name: 1}):
            pass


@pytest.mark.parametrize("value", [{"a": 1}, [1, 2], None, object(), b"bytes", ["a", 2]])
def test_attribute_values_must_be_scalars_or_string_lists(make_run, value):
    run = make_run()
    with run.trace("x") as span:
        with pytest.raises(TypeError):
            span.set_attribute("a", value)


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
    assert close["attributes"]["nan"] == "nan"  # JSON has no NaN; kept readable
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


def test_metric_values_are_checked(make_run, transport):
    run = make_run()
    with pytest.raises(TypeError):
        run.log_metrics({"loss": "high"}, step=1)
    with pytest.raises(TypeError):
        run.log_metrics({"": 1.0}, step=1)
    run.log_metrics({"ok": 1, "nan": float("nan"), "inf": float("inf"), "flag": True}, step=2)
    run.flush()
    assert {(p["key"], p["value"]) for p in transport.points()} == {("ok", 1), ("flag", 1.0)}
