"""Carriers into workers, sampling per root, and switching tracing off."""

import json
import os
import subprocess
import sys

import pytest

import treeline as tl


def test_carrier_round_trip_in_another_thread(make_run, transport):
    import threading

    run = make_run()
    with run.trace("batch item 17", kind="preprocessing", step=5) as root:
        carrier = root.context()
    assert json.loads(json.dumps(carrier)) == carrier  # crosses process boundaries as JSON
    assert carrier["traceparent"] == "00-%s-%s-01" % (root.trace_id, root.span_id)

    def worker():
        with run.attach_trace_context(carrier):
            with run.start_span("worker.tokenize", kind="preprocessing") as span:
                pass
        out.append(span)

    out = []
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    run.flush()
    ev = transport.opens()[out[0].span_id]
    assert ev["trace_id"] == root.trace_id and ev["parent_span_id"] == root.span_id
    assert ev["step"] == 5


def test_carrier_from_another_run_raises(make_run):
    a, b = make_run(), make_run()
    with a.trace("root") as root:
        carrier = root.context()
    with pytest.raises(ValueError, match="run-scoped"):
        b.attach_trace_context(carrier)
    with pytest.raises(TypeError):
        b.attach_trace_context("00-abc")


def test_carrier_of_an_unsampled_root_makes_the_worker_inert(make_run, transport):
    run = make_run(sample_rate=0.0)
    with run.trace("root") as root:
        carrier = root.context()
    assert carrier["sampled"] is False
    with run.attach_trace_context(carrier) as parent:
        with run.start_span("worker") as span:
            assert not span.is_recording
        assert not parent.span("x").is_recording
    run.flush()
    assert transport.events() == []


def test_an_unsampled_root_makes_its_whole_tree_inert(make_run, transport):
    run = make_run(sample_rate=0.0)

    @run.trace_op(kind="tool")
    def op():
        return 42

    with run.trace("root", attributes={"a": 1}) as root:
        assert not root.is_recording
        with root.span("child") as child:
            child.set_output("x")
            child.set_attribute("k", "v")
            child.token_count = 3
            child.log_metric("m", 1.0)
            with child.model("m") as grandchild:
                pass
        with run.span("via run"):
            assert op() == 42
        assert tl.current_span() is root
    assert not child.is_recording and not grandchild.is_recording
    run.log_metrics({"loss": 1.0}, step=0)  # metrics are not sampled
    run.flush()
    assert transport.events() == []
    assert len(transport.points()) == 1


def test_sampling_is_decided_per_root(make_run, transport):
    run = make_run(sample_rate=0.3)
    kept = 0
    for i in range(2000):
        with run.trace("r") as root:
            with root.span("c") as child:
                assert child.is_recording == root.is_recording
            kept += root.is_recording
    assert 450 < kept < 750
    run.flush()
    assert len(transport.opens()) == 2 * kept


def test_everything_off_keeps_the_whole_surface(tmp_path):
    code = r"""
import asyncio, treeline as tl
run = tl.init("p", name="n", config={"a": 1})
@run.trace_op(kind="tool")
def f(x): return x + 1
@run.trace_op
async def g(x): return x * 2
with tl.step(1), tl.attributes({"a": 1}):
    with run.trace("root", kind="rollout", inputs={"q": 1}, capture="preview") as root:
        with root.span("c", kind="model") as c:
            c.set_output(1); c.set_attributes({"k": "v"}); c.token_count = 3
            c.log_metric("r", 1.0); c.add_link(root); c.set_status("truncated")
            with c.model("m", prompt="p"), c.tool("t"), c.thought(text="x"), c.agent("a"), c.iteration():
                pass
        assert f(1) == 2 and asyncio.run(g(2)) == 4
        carrier = root.context()
    with run.attach_trace_context(carrier):
        run.start_span("w").end("ok")
    with tl.model("module-level"):
        pass
try:
    run.trace("x", kind="bogus")
except ValueError:
    print("kind checked")
run.log_metrics({"loss": 1.0}, step=1)
print(run.flush(), run.finish())
print(type(root).__name__, root.is_recording)
"""
    env = dict(os.environ, TREELINE_OFF="1", TREELINE_URL="http://127.0.0.1:9",
               TREELINE_SPOOL_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["kind checked", "True True", "NoopSpan False"]
    assert out.stderr == ""  # no network attempt, no warning
    assert not list(tmp_path.iterdir())  # nothing spooled


def test_nothing_initialized_gives_inert_module_level_spans():
    code = "import treeline as tl\nwith tl.tool('t') as t: print(t.is_recording)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=30)
    assert out.stdout.strip() == "False", out.stderr
