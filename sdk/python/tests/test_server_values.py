"""Against a real server: what a tracing call could not store as given reads back as
the user would want it (nested attributes flattened, NaN dropped, a long text cut
with a marker), a body the SDK cut is flagged in the span detail, and a failure keeps
its traceback."""

import pytest

import treeline as tl

pytestmark = pytest.mark.server


def _run(server, tmp_path, **options):
    return tl.init("sdk-values", url=server.url, spool_dir=str(tmp_path / "spool"),
                   finish_on_exit=False, **options)


def _detail(server, run, span):
    status, body = server.get("/api/runs/%s/traces/%s/spans/%s"
                              % (run.run_id, span.trace_id, span.span_id))
    assert status == 200, body
    return body


def test_nested_and_non_finite_attributes_never_fail_the_trace(server, tmp_path):
    run = _run(server, tmp_path)
    with run.trace("episode", attributes={"env": {"name": "CartPole", "seed": 3},
                                          "score": float("inf")}) as root:
        root.set_attribute("sampling", {"temperature": 1.0, "top": {"p": 0.9}})
        root.set_attribute("loss", float("nan"))
        root.set_attribute("ids", [1, 2])
    assert run.finish() is True
    attrs = _detail(server, run, root)["attributes"]
    assert attrs == {"env.name": "CartPole", "env.seed": 3, "sampling.temperature": 1.0,
                     "sampling.top.p": 0.9, "ids": "[1, 2]"}
    c = run.counters()
    assert (c["dropped_values"], c["converted_attributes"], c["rejected"]) == (2, 3, 0)
    # The flattened names filter like any root attribute.
    client = tl.Client(server.url)
    assert len(list(client.traces(run_id=run.run_id,
                                  filter="attr.sampling.temperature >= 1"))) == 1


def test_a_huge_attribute_is_cut_with_a_marker_the_dashboard_shows(server, tmp_path):
    run = _run(server, tmp_path)
    with run.trace("episode") as root:
        root.set_attribute("transcript", "word " * 400_000)
    assert run.finish() is True
    text = _detail(server, run, root)["attributes"]["transcript"]
    assert text.startswith("word word ")
    assert text.endswith("… [cut from 2,000,000 characters]")
    assert len(text.encode()) <= 64 * 1024
    assert run.counters()["cut_attributes"] == 1 and run.counters()["rejected"] == 0


def test_a_body_the_preview_cut_is_flagged_in_the_span_detail(server, tmp_path):
    run = _run(server, tmp_path, capture="preview")
    with run.trace("episode", "agent", inputs={"obs": "o" * 2_000_000}) as root:
        root.set_output("x" * 2_000_000)
        with root.tool("small", inputs={"q": 1}) as small:
            small.set_output({"hits": 2})
    assert run.finish() is True
    detail = _detail(server, run, root)
    assert detail["output_truncated"] is True and detail["input_truncated"] is True
    assert detail["output"].startswith("xxx") and len(detail["output"]) <= 8193
    detail = _detail(server, run, small)
    assert detail["output_truncated"] is False and detail["input_truncated"] is False


def _load(batch):
    if not batch:
        raise ValueError("empty batch (token sk-live-abcdefghijklmnop)")
    return batch


def test_a_failure_keeps_a_redacted_traceback_under_preview(server, tmp_path):
    run = _run(server, tmp_path, capture="preview")
    with pytest.raises(ValueError):
        with run.trace("episode", "rollout") as root:
            with root.tool("loader") as loader:
                _load([])
    assert run.finish() is True
    error = _detail(server, run, loader)["error"]
    assert error["type"] == "ValueError"
    assert error["message"] == "empty batch (token [REDACTED])"
    traceback = error["traceback"]
    assert traceback.startswith("Traceback (most recent call last):")
    assert ", in _load\n" in traceback and "_load([])" in traceback
    assert traceback.endswith("ValueError: empty batch (token [REDACTED])\n")
    assert "sk-live" not in traceback
