"""The second call surface without a server: its constructors open the kind they name
with the input they were given, the enums pass for the strings, agent-shaped spans
take a task and a final answer, and the SDK's errors share one root."""

import subprocess
import sys

import pytest

import treeline as tl

TASK = {"question": "17 * 23?"}


def _opened(run, transport, span):
    run.flush(5)
    return transport.opens()[span.span_id]


def _closed(run, transport, span):
    run.flush(5)
    return transport.closes()[span.span_id]


# Each child constructor of the second surface: the kind it opens, and how it takes
# its input at creation.
CHILDREN = [
    ("llm_call", dict(prompt=[{"role": "user", "content": "hi"}]), "model"),
    ("tool_call", dict(input={"q": "spiders"}), "tool"),
    ("sub_agent", dict(input=TASK), "agent"),
    ("iteration", dict(input={"turn": 1}), "iteration"),
    ("artifact", dict(input={"path": "out.json"}), "artifact"),
    ("function", dict(input={"x": 2}), "function"),
]


@pytest.mark.parametrize("where", ["module", "span", "run"])
@pytest.mark.parametrize("call, given, kind", CHILDREN, ids=[c[0] for c in CHILDREN])
def test_each_child_constructor_opens_its_kind_with_its_input(
        make_run, transport, where, call, given, kind):
    run = make_run(capture="preview")
    with run.trace("rollout") as root:
        maker = {"module": tl, "span": root, "run": run}[where]
        with getattr(maker, call)("child", **given) as child:
            pass
    opened = _opened(run, transport, child)
    assert opened["kind"] == kind and opened["parent_span_id"] == root.span_id
    assert opened["input"] == next(iter(given.values()))  # rode the open


def test_a_thought_records_its_text_as_its_output(make_run, transport):
    run = make_run(capture="preview")
    with run.trace("rollout"):
        with tl.thought("plan") as thought:
            thought.text("search first")
    assert _opened(run, transport, thought)["kind"] == "thought"
    assert _closed(run, transport, thought)["output"] == "search first"


def test_roots_open_new_traces_of_their_kind(make_run, transport):
    run = make_run(capture="preview")
    with run.trace("outer", kind="rollout") as outer:
        # A root is a new trace even inside another trace's block.
        with tl.agent_trace("rollout", task_input=TASK) as agent_root:
            pass
        with tl.model_trace("inference", prompt="2+2?") as model_root:
            pass
        with tl.trace("loop", kind=tl.Kind.ITERATION, input={"turn": 0}) as loop_root:
            pass
    for root, kind, given in [(agent_root, "agent", TASK), (model_root, "model", "2+2?"),
                              (loop_root, "iteration", {"turn": 0})]:
        opened = _opened(run, transport, root)
        assert opened["parent_span_id"] is None and root.trace_id != outer.trace_id
        assert (opened["kind"], opened["input"]) == (kind, given)


def test_a_root_without_a_kind_is_an_agent(make_run, transport):
    run = make_run()
    roots = [run.trace("a"), tl.trace("b")]
    with run.session("chat") as session:
        roots.append(session.trace("turn"))
    for root in roots:
        with root:
            pass
    assert [_opened(run, transport, r)["kind"] for r in roots] == ["agent"] * 3
    # A child still defaults to custom: only roots changed.
    with run.trace("r") as r:
        with r.span("c") as c:
            pass
    assert _opened(run, transport, c)["kind"] == "custom"


def test_input_and_output_setters_record_the_bodies(make_run, transport):
    run = make_run(capture="preview")
    with run.trace("rollout") as root:
        with root.tool_call("search") as tool:
            tool.input({"q": "legs"}).output(["8 legs"])  # they chain, like set_input
    assert _opened(run, transport, tool)["input"] == {"q": "legs"}
    assert _closed(run, transport, tool)["output"] == ["8 legs"]
    with pytest.raises(tl.BodyAlreadyRecorded, match="already has its output"):
        tool.output("again")


@pytest.mark.parametrize("kind", ["agent", "iteration", "artifact"])
def test_agent_shaped_spans_take_a_task_and_a_final_answer(make_run, transport, kind):
    run = make_run(capture="preview")
    with run.trace("root", kind=kind) as root:
        root.task_input(TASK)
        with root.span("child", kind=kind) as child:  # not only on a root
            child.task_input("sub-task").final_output("sub-answer")
        root.final_output({"answer": 391})
    assert _opened(run, transport, root)["input"] == TASK
    assert _closed(run, transport, root)["output"] == {"answer": 391}
    assert _closed(run, transport, child)["output"] == "sub-answer"


def test_task_input_on_another_kind_names_the_kinds_it_is_for(make_run):
    run = make_run()
    with run.trace("rollout") as root:
        with root.tool_call("search") as tool:
            with pytest.raises(tl.InvalidValue, match=r"task_input\(\) is for agent, "
                               r"iteration or artifact spans; span 'search' is a tool span"):
                tool.task_input("x")


def test_input_and_inputs_are_one_input(make_run, transport):
    run = make_run(capture="preview")
    with run.trace("root", inputs={"old": "spelling"}) as old:
        pass
    with run.trace("root", input={"new": "spelling"}) as new:
        pass
    assert _opened(run, transport, old)["input"] == {"old": "spelling"}
    assert _opened(run, transport, new)["input"] == {"new": "spelling"}
    for make in (lambda: run.trace("x", inputs=1, input=2),
                 lambda: tl.tool_call("x", 1, input=2),
                 lambda: tl.llm_call("x", prompt="p", input="q"),
                 lambda: tl.agent_trace("x", task_input="t", input="u"),
                 lambda: run.session("s", inputs=1, input=2)):
        with pytest.raises(tl.InvalidType, match="pass the input once"):
            make()


def test_kinds_and_statuses_are_enums_equal_to_their_strings(make_run, transport):
    run = make_run()
    assert tl.Kind.LLM_CALL is tl.Kind.MODEL and tl.Kind.MODEL == "model"
    assert tl.SpanKind is tl.Kind and tl.SpanStatus is tl.Status
    assert {k.value for k in tl.Kind} == set(tl.KINDS)
    assert set(tl.SPAN_STATUSES) < {s.value for s in tl.Status}
    with run.trace("root", kind=tl.Kind.SUB_AGENT) as root:
        with root.span("call", kind=tl.SpanKind.LLM_CALL) as call:
            call.set_status(tl.Status.TRUNCATED)
        cancelled = root.tool_call("deploy").start()
        cancelled.end(tl.SpanStatus.CANCELLED)
    assert (root.kind, call.kind) == ("agent", "model")
    assert type(call.kind) is str  # stored as the plain string
    assert _opened(run, transport, call)["kind"] == "model"
    assert _closed(run, transport, call)["status"] == "truncated"
    assert _closed(run, transport, cancelled)["status"] == "cancelled"
    with pytest.raises(tl.InvalidValue, match="not valid for closing"):
        cancelled.end(tl.Status.RUNNING)  # a list filter, never a close
    with pytest.raises(tl.InvalidValue, match="kind 'session'"):
        run.trace("x", kind=tl.Kind.SESSION_SUMMARY)


def test_the_decorator_takes_a_kind_enum_and_op_is_trace_op(make_run, transport):
    run = make_run()

    @run.op(kind=tl.Kind.TOOL_CALL)
    def search(q):
        return [q]

    @tl.op
    def plain(x):
        return x

    with run.trace("root"):
        assert search("a") == ["a"] and plain(3) == 3
    run.flush(5)
    kinds = {e["name"].rsplit(".", 1)[-1]: e["kind"] for e in transport.opens().values()}
    assert kinds["search"] == "tool" and kinds["plain"] == "function"


def test_close_finishes_the_current_run(make_run, transport):
    run = make_run()
    with tl.agent_trace("rollout"):
        pass
    assert tl.close() is True
    finishes = [r for r in transport.sent if r["path"].endswith("/finish")]
    assert len(finishes) == 1 and finishes[0]["body"]["status"] == "finished"
    assert run._finished


def test_inert_spans_have_the_second_surface_and_still_check(tmp_path):
    run = tl.init("p", disabled=True)
    with tl.agent_trace("rollout", task_input=TASK) as root:
        with root.sub_agent("planner") as planner:
            with planner.llm_call("policy", prompt="p") as llm:
                llm.completion("c")
                llm.token_count = 3
            planner.artifact("plan.md").final_output("done")
        with pytest.raises(tl.BodyAlreadyRecorded):
            root.task_input("again")
        with pytest.raises(tl.InvalidValue):
            root.span("f", kind="bogus")
    assert not root.is_recording and run.counters()["dropped_spans"] == 0


def test_with_nothing_initialized_the_second_surface_is_inert():
    code = ("import treeline as tracing\n"
            "with tracing.agent_trace('rollout', task_input='t') as trace:\n"
            "    with tracing.llm_call('policy', prompt='p') as llm:\n"
            "        llm.completion('c')\n"
            "    with tracing.tool_call('search', input='q') as tool:\n"
            "        tool.output('r')\n"
            "    trace.final_output('a')\n"
            "with tracing.trace('x', kind=tracing.Kind.ARTIFACT) as other:\n"
            "    other.final_output('made')\n"
            "print(trace.is_recording, llm.is_recording, other.is_recording, tracing.close())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=30)
    assert out.stdout.strip() == "False False False True", out.stderr
    assert out.stderr == ""  # no run: no link, no warning


# -- one root for the SDK's errors -------------------------------------------------------

def test_the_sdks_errors_share_one_root_and_keep_their_builtin_bases():
    for error in (tl.BodyAlreadyRecorded, tl.ApiError, tl.AuthError, tl.NotFound,
                  tl.Unreachable, tl.InvalidValue, tl.InvalidType):
        assert issubclass(error, tl.TreelineError), error
    assert issubclass(tl.InvalidValue, ValueError) and issubclass(tl.InvalidType, TypeError)
    assert issubclass(tl.BodyAlreadyRecorded, ValueError)


@pytest.mark.parametrize("mistake, builtin", [
    (lambda run: tl.init("p", url="127.0.0.1:3000"), ValueError),
    (lambda run: run.trace("x", kind="bogus"), ValueError),
    (lambda run: run.trace("x", step=-1), ValueError),
    (lambda run: run.trace(42), TypeError),
    (lambda run: run.trace("x", step="3"), TypeError),
    (lambda run: tl.span("x", parent=object()), TypeError),
    (lambda run: run.attach_trace_context("not a carrier"), TypeError),
    (lambda run: tl.Client("http://127.0.0.1:1/path"), ValueError),
    (lambda run: tl.Client("http://127.0.0.1:1").traces(page_size=0), ValueError),
    (lambda run: tl.Client("http://127.0.0.1:1").run(""), TypeError),
    (lambda run: tl.Client("http://127.0.0.1:1").run("r1"), None),  # nothing listens
], ids=["url", "kind", "step", "name-type", "step-type", "parent", "carrier", "client-url",
        "page-size", "run-id", "unreachable"])
def test_a_caller_catches_every_sdk_error_as_treeline_error(make_run, mistake, builtin):
    run = make_run()
    with pytest.raises(tl.TreelineError) as caught:
        mistake(run)
    if builtin is not None:  # code that catches the built-in class still does
        assert isinstance(caught.value, builtin)
    else:
        assert isinstance(caught.value, tl.Unreachable)
