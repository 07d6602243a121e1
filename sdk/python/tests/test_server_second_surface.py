"""Against a real server: code written to the second call surface runs with only its
import lines and its init call changed, and what each of its calls recorded reads back
through treeline.Client with the kind, bodies and totals it was given."""

import os
import subprocess
import sys
import urllib.request

import pytest

import treeline as tl

pytestmark = pytest.mark.server


def _run(server, tmp_path, project, **options):
    options.setdefault("finish_on_exit", False)
    return tl.init(project, url=server.url, spool_dir=str(tmp_path / "spool"),
                   capture="preview", **options)


def _kids(client, run, span):
    return list(client.spans(run.run_id, span.trace_id, parent=span.span_id))


def _detail(client, run, span):
    return client.span(run.run_id, span.trace_id, span.span_id)


def test_the_overview_loop_runs_and_reads_back(server, tmp_path):
    import treeline as tracing  # the one import this code needs

    # The init call: everything below is written to the second surface as it is.
    run = tracing.init("grid-agents", name="grpo-small", url=server.url,
                       spool_dir=str(tmp_path / "spool"), capture="preview",
                       finish_on_exit=False)

    batch = [{"puzzle": "3 + 4"}, {"puzzle": "5 * 6"}]
    rewards = {}
    for step in range(2):
        with tracing.step(step):
            for task in batch:
                messages = [{"role": "user", "content": task["puzzle"]}]
                with tracing.agent_trace("episode", task_input=task) as trace:
                    with tracing.llm_call("policy", prompt=messages) as llm:
                        llm.completion("use the calculator")
                        llm.token_count = 40 + step
                    with tracing.tool_call("calculator", input=task["puzzle"]) as tool:
                        tool.output(eval(task["puzzle"]))
                    trace.final_output({"answer": eval(task["puzzle"])})
                    trace.set_attributes({"reward": 0.5 + step})
                rewards[trace.trace_id] = (step, task, trace)
        run.log_metrics({"reward/mean": 0.5 + step}, step=step)
    assert tracing.close() is True

    client = tl.Client(server.url)
    assert client.run(run.run_id)["status"] == "finished"
    traces = list(client.traces(run_id=run.run_id))
    assert sorted(t["trace_id"] for t in traces) == sorted(rewards)
    for t in traces:
        step, task, trace = rewards[t["trace_id"]]
        assert (t["name"], t["kind"], t["step"], t["status"]) == ("episode", "agent", step, "ok")
        assert t["span_count"] == 3 and t["token_count"] == 40 + step
        assert t["attributes"] == {"reward": 0.5 + step}
        root = _detail(client, run, trace)
        assert root["input"] == task and root["output"] == {"answer": eval(task["puzzle"])}
        llm, tool = _kids(client, run, trace)
        assert (llm["name"], llm["kind"], llm["token_count"]) == ("policy", "model", 40 + step)
        assert (tool["name"], tool["kind"]) == ("calculator", "tool")
        llm = client.span(run.run_id, t["trace_id"], llm["span_id"])
        assert llm["input"] == [{"role": "user", "content": task["puzzle"]}]
        assert llm["output"] == "use the calculator"
        tool = client.span(run.run_id, t["trace_id"], tool["span_id"])
        assert tool["input"] == task["puzzle"] and tool["output"] == eval(task["puzzle"])
    points = client.metrics(run.run_id, "reward/mean")["points"]
    assert points == [[0, 0.5], [1, 1.5]]


def test_every_constructor_reads_back_with_its_kind_and_bodies(server, tmp_path):
    run = _run(server, tmp_path, "second-surface")

    @tl.op
    def grade(answer):
        return 1.0 if answer == "shipped" else 0.0

    with tl.agent_trace("rollout", task_input={"goal": "ship"}) as root:
        with tl.sub_agent("planner", input="plan it") as planner:
            with planner.llm_call("policy", prompt="what next?") as llm:  # on the span
                llm.completion("write the file")
                llm.token_count = 9
            with tl.thought("why") as thought:
                thought.text("the file is the deliverable")
            planner.final_output("planned")
        with tl.iteration(input={"turn": 1}) as turn:
            with tl.tool_call("write", input={"path": "a.txt"}) as tool:
                tool.output({"bytes": 3})
            with tl.artifact("a.txt") as artifact:
                artifact.input({"path": "a.txt"})
                artifact.output("abc")
            with tl.function("checksum", input={"data": "abc"}) as fn:
                fn.output("900150983cd24fb0")
            turn.final_output("wrote a.txt")
        assert grade("shipped") == 1.0
        root.final_output("shipped")
    with run.model_trace("inference", prompt="2 + 2?") as inference:
        inference.completion("4")
    with run.session("chat") as chat:
        with chat.agent_trace("turn", task_input="hi") as turn_root:
            turn_root.final_output("hello")
    with run.trace("loop", kind=tl.Kind.ITERATION, input={"turn": 0}) as loop:
        loop.final_output("done")
    with tl.trace("default kind") as default:
        pass
    assert run.finish() is True

    client = tl.Client(server.url)
    want = [  # span, kind, input, output
        (root, "agent", {"goal": "ship"}, "shipped"),
        (planner, "agent", "plan it", "planned"),
        (llm, "model", "what next?", "write the file"),
        (thought, "thought", None, "the file is the deliverable"),
        (turn, "iteration", {"turn": 1}, "wrote a.txt"),
        (tool, "tool", {"path": "a.txt"}, {"bytes": 3}),
        (artifact, "artifact", {"path": "a.txt"}, "abc"),
        (fn, "function", {"data": "abc"}, "900150983cd24fb0"),
        (inference, "model", "2 + 2?", "4"),
        (turn_root, "agent", "hi", "hello"),
        (loop, "iteration", {"turn": 0}, "done"),
        (default, "agent", None, None),
    ]
    for span, kind, given, answer in want:
        d = _detail(client, run, span)
        assert (d["name"], d["kind"], d["input"], d["output"]) == (span.name, kind, given, answer)
    assert _detail(client, run, llm)["token_count"] == 9
    graded = _kids(client, run, root)
    assert [s["name"].rsplit(".", 1)[-1] for s in graded] == ["planner", "iteration", "grade"]
    graded = client.span(run.run_id, root.trace_id, graded[2]["span_id"])
    assert graded["kind"] == "function"  # what op records
    assert (graded["input"], graded["output"]) == ({"answer": "shipped"}, 1.0)
    turn_summary = client.trace(run.run_id, turn_root.trace_id)
    assert turn_summary["attributes"]["treeline.session_id"] == chat.session_id
    assert [s["name"] for s in _kids(client, run, turn)] == ["write", "a.txt", "checksum"]
    summary = client.trace(run.run_id, root.trace_id)
    assert summary["iteration_count"] == 1 and summary["span_count"] == 9
    roots = {t["name"]: t["kind"] for t in client.traces(run_id=run.run_id)}
    assert roots == {"rollout": "agent", "inference": "model", "loop": "iteration",
                     "default kind": "agent", "turn": "agent", "chat": "session"}


def test_statuses_and_kinds_as_enums_reach_the_server_and_filter_lists(server, tmp_path):
    run = _run(server, tmp_path, "second-surface-enums")
    deploy = tl.agent_trace("deploy").start()
    deploy.end(tl.SpanStatus.CANCELLED)
    with tl.model_trace("inference") as inference:
        inference.set_status(tl.Status.TRUNCATED)
    with tl.trace("probe", kind=tl.SpanKind.TOOL_CALL):
        pass
    assert run.finish() is True

    client = tl.Client(server.url)

    def names(**query):
        return sorted(t["name"] for t in client.traces(run_id=run.run_id, **query))

    assert names(status=tl.Status.CANCELLED) == ["deploy"]
    assert names(status=[tl.Status.TRUNCATED, tl.Status.CANCELLED]) == ["deploy", "inference"]
    assert names(kind=tl.Kind.LLM_CALL) == ["inference"]
    assert names(kind=[tl.Kind.TOOL, "agent"]) == ["deploy", "probe"]


def test_the_servers_errors_are_caught_as_treeline_errors(server):
    client = tl.Client(server.url)
    with pytest.raises(tl.TreelineError) as caught:
        client.run("no-such-run")
    assert isinstance(caught.value, tl.NotFound) and caught.value.status == 404
    with pytest.raises(tl.TreelineError) as caught:
        list(client.traces(filter="attr.x <<< 1"))
    assert isinstance(caught.value, tl.ApiError) and caught.value.status == 400


def test_the_logged_link_opens_the_runs_page(server, tmp_path):
    code = ("import treeline as tl\n"
            "run = tl.init('linked', name='seed-1', url=%r, spool_dir=%r)\n"
            "with tl.agent_trace('rollout'):\n"
            "    pass\n"
            "run.finish()\n"
            "print(run.run_id)\n" % (server.url, str(tmp_path)))
    env = dict(os.environ)
    env.pop("TREELINE_QUIET", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    run_id = out.stdout.strip()
    page = "%s/runs/%s" % (server.url, run_id)
    assert out.stderr.splitlines() == ["treeline: run 'seed-1' (%s) started: %s" % (run_id, page),
                                       "treeline: run 'seed-1' (%s) finished: %s" % (run_id, page)]
    with urllib.request.urlopen(page, timeout=10) as resp:
        html = resp.read().decode("utf-8")
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/html")
    assert run_id in html  # the page is the run's, not a generic one
