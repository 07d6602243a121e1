"""`@run.trace_op` on sync and async functions."""

import asyncio

import pytest

import treeline as tl


def test_sync_op_nests_and_preserves_the_return_value(make_run, transport):
    run = make_run()

    @run.trace_op(name="reward.score", kind="reward", attributes={"component": "dense"},
                  metrics={"calls": 1})
    def score(observation, action):
        return {"reward": 0.92}

    @run.trace_op
    def bare(x):
        return x * 2

    with run.trace("rollout", kind="rollout", step=3) as root:
        assert score([0.1], 1) == {"reward": 0.92}
        assert bare(4) == 8
    assert bare(5) == 10  # outside any trace: its own root
    run.flush()
    by_name = {}
    for e in transport.opens().values():
        by_name.setdefault(e["name"], []).append(e)
    assert by_name["reward.score"][0]["kind"] == "reward"
    assert by_name["reward.score"][0]["parent_span_id"] == root.span_id
    assert by_name["reward.score"][0]["attributes"] == {"component": "dense"}
    assert by_name["reward.score"][0]["step"] == 3
    name = "test_sync_op_nests_and_preserves_the_return_value.<locals>.bare"
    assert [e["parent_span_id"] for e in by_name[name]] == [root.span_id, None]
    assert by_name[name][0]["kind"] == "function"
    score_close = transport.closes()[by_name["reward.score"][0]["span_id"]]
    assert score_close["metrics"] == {"calls": 1} and "output" not in score_close


def test_exceptions_are_recorded_and_reraised(make_run, transport):
    run = make_run()

    @run.trace_op(kind="tool")
    def fails():
        raise ValueError("token=abcdef123")

    @run.trace_op(kind="tool", capture="preview")
    def fails_loudly():
        raise ValueError("token=abcdef123 and more")

    with pytest.raises(ValueError):
        fails()
    with pytest.raises(ValueError):
        fails_loudly()
    run.flush()
    errors = [c["error"] for c in transport.closes().values()]
    assert {"type": "ValueError"} in errors
    loud = [e for e in errors if "message" in e][0]
    assert "abcdef123" not in loud["message"] and "and more" in loud["message"]
    assert all(c["status"] == "error" for c in transport.closes().values())


def test_preview_captures_arguments_by_name_and_redacts(make_run, transport):
    run = make_run()

    @run.trace_op(capture="preview")
    def call(observation, action, authorization=None):
        return {"secret": "s3cr3t", "value": "sk-abcdefghijklmnop"}

    call({"state": [0.0]}, "left", authorization="Bearer service-token-123")
    run.flush()
    opened = list(transport.opens().values())[0]
    closed = list(transport.closes().values())[0]
    assert opened["input"] == {"observation": {"state": [0.0]}, "action": "left",
                               "authorization": "[REDACTED]"}
    assert closed["output"] == {"secret": "[REDACTED]", "value": "[REDACTED]"}


def test_async_op_spans_cover_the_awaited_body(make_run, transport):
    run = make_run(capture="preview")

    @run.trace_op(name="judge", kind="evaluator")
    async def judge(answer):
        await asyncio.sleep(0.01)
        with tl.thought(text="checking"):
            pass
        return {"score": len(answer)}

    @run.trace_op(kind="tool")
    async def broken():
        await asyncio.sleep(0)
        raise RuntimeError("no")

    async def rollout(i):
        with run.trace("rollout %d" % i, kind="rollout") as root:
            result = await judge("x" * i)
            with pytest.raises(RuntimeError):
                await broken()
            return root.span_id, result

    async def main():
        return await asyncio.gather(*(rollout(i) for i in range(1, 4)))

    results = asyncio.run(main())
    assert [r for _, r in results] == [{"score": 1}, {"score": 2}, {"score": 3}]
    run.flush()
    opens = transport.opens()
    closes = transport.closes()
    judges = [e for e in opens.values() if e["name"] == "judge"]
    assert sorted(e["parent_span_id"] for e in judges) == sorted(r for r, _ in results)
    for j in judges:
        assert closes[j["span_id"]]["output"]["score"] in (1, 2, 3)
        thoughts = [e for e in opens.values() if e["parent_span_id"] == j["span_id"]]
        assert [t["kind"] for t in thoughts] == ["thought"]
    assert sum(c["status"] == "error" for c in closes.values()) == 3


def test_methods_do_not_capture_self(make_run, transport):
    run = make_run(capture="preview")

    class Policy:
        @run.trace_op(kind="model")
        def act(self, obs):
            return obs + 1

    assert Policy().act(1) == 2
    run.flush()
    assert list(transport.opens().values())[0]["input"] == {"obs": 1}


def test_module_level_trace_op_uses_the_active_run(make_run, transport):
    @tl.trace_op(kind="tool")
    def lookup(q):
        return q

    run = make_run()
    with run.trace("root") as root:
        assert lookup("a") == "a"
    run.flush()
    child = [e for e in transport.opens().values() if e["kind"] == "tool"][0]
    assert child["parent_span_id"] == root.span_id


def test_generator_ops_cover_the_iteration(make_run, transport):
    run = make_run()

    @run.trace_op(kind="dataset")
    def batches(n):
        for i in range(n):
            yield i

    @run.trace_op(kind="dataset")
    async def stream(n):
        for i in range(n):
            await asyncio.sleep(0)
            yield i

    async def consume():
        return [i async for i in stream(3)]

    with run.trace("epoch") as root:
        assert list(batches(3)) == [0, 1, 2]
        for i in batches(10):
            if i == 1:
                break
        assert asyncio.run(consume()) == [0, 1, 2]
    run.flush()
    spans = [(e["kind"], e["parent_span_id"]) for e in transport.opens().values()
             if e["kind"] == "dataset"]
    assert spans == [("dataset", root.span_id)] * 3
    statuses = sorted(transport.closes()[sid]["status"] for sid, e in transport.opens().items()
                      if e["kind"] == "dataset")
    assert statuses == ["cancelled", "ok", "ok"]  # the loop that broke off early
