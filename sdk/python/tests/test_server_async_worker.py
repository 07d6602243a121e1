"""Against a real server: async trace_op nesting, and a worker process joining a trace."""

import asyncio
import json
import os
import subprocess
import sys
import textwrap

import pytest

import treeline as tl

pytestmark = pytest.mark.server


def _ok(result):
    status, body = result
    assert status == 200, body
    return body


def test_async_trace_op_nests_per_task(server, tmp_path):
    run = tl.init("sdk-tests", url=server.url, spool_dir=str(tmp_path), finish_on_exit=False)

    @run.trace_op(name="judge.answer", kind="evaluator", capture="preview")
    async def judge(answer):
        await asyncio.sleep(0.01)
        return {"score": len(answer)}

    async def rollout(i):
        with run.trace("rollout %d" % i, kind="rollout", step=i) as root:
            await asyncio.sleep(0.005 * (3 - i))
            score = await judge("x" * i)
            return root, score

    async def main():
        return await asyncio.gather(*(rollout(i) for i in range(3)))

    results = asyncio.run(main())
    assert [s for _, s in results] == [{"score": 0}, {"score": 1}, {"score": 2}]
    assert run.finish() is True
    for root, score in results:
        kids = _ok(server.get("/api/runs/%s/traces/%s/spans?parent_span_id=%s"
                              % (run.run_id, root.trace_id, root.span_id)))["spans"]
        assert [(k["name"], k["kind"]) for k in kids] == [("judge.answer", "evaluator")]
        detail = _ok(server.get("/api/runs/%s/traces/%s/spans/%s"
                                % (run.run_id, root.trace_id, kids[0]["span_id"])))
        assert detail["output"] == score and detail["input"] == {"answer": "x" * root.step}


def test_a_worker_process_joins_the_trace_through_a_carrier(server, tmp_path):
    run = tl.init("sdk-tests", url=server.url, spool_dir=str(tmp_path), finish_on_exit=False)
    with run.trace("batch item 17", kind="preprocessing", step=17) as root:
        carrier = root.context()
        worker = textwrap.dedent("""
            import json, sys, treeline as tl
            carrier = json.loads(sys.argv[1])
            run = tl.init(carrier["project"], run_id=carrier["run_id"])
            with run.attach_trace_context(carrier):
                with run.start_span("worker.tokenize", kind="preprocessing") as span:
                    span.set_attribute("pid", 1)
            assert run.flush(20)
        """)
        env = dict(os.environ, TREELINE_URL=server.url, TREELINE_SPOOL_DIR=str(tmp_path))
        done = subprocess.run([sys.executable, "-c", worker, json.dumps(carrier)], env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    # The worker joined the run; it did not finish it.
    assert _ok(server.get("/api/runs/%s" % run.run_id))["status"] == "running"
    assert run.finish() is True
    kids = _ok(server.get("/api/runs/%s/traces/%s/spans?parent_span_id=%s"
                          % (run.run_id, root.trace_id, root.span_id)))["spans"]
    assert [(k["name"], k["status"], k["step"]) for k in kids] == [
        ("worker.tokenize", "ok", 17)]
    with pytest.raises(ValueError):
        tl.init("sdk-tests", url=server.url, spool_dir=str(tmp_path),
                finish_on_exit=False).attach_trace_context(carrier)
