"""Against a real `treeline serve`: what the SDK writes reads back through the query API."""

import json
import urllib.parse

import pytest

import treeline as tl

pytestmark = pytest.mark.server


def _run(server, tmp_path, **options):
    options.setdefault("finish_on_exit", False)
    return tl.init(options.pop("project", "sdk-tests"), url=server.url,
                   spool_dir=str(tmp_path / "spool"), **options)


def _ok(result):
    status, body = result
    assert status == 200, body
    return body


def test_round_trip_through_the_query_api(server, tmp_path):
    run = _run(server, tmp_path, name="ppo-seed-42",
               config={"algorithm": "ppo", "seed": 42, "api_key": "not-for-the-server"})
    with run.trace("rollout episode 42", kind="rollout", step=42, capture="preview",
                   attributes={"env": "CartPole-v1", "rollout_id": "ep-42"},
                   inputs={"episode": 42}) as root:
        with root.span("policy.forward", kind="model",
                       inputs={"observation": [0.0, 0.1, 0.2, 0.3]}) as policy:
            policy.set_output({"action": 1})
            policy.token_count = 12
        with root.span("env.step", kind="env_step", capture="off") as env_step:
            env_step.log_metric("reward", 1.0)
            env_step.set_attribute("terminated", False)
        with pytest.raises(ValueError):
            with root.tool("lookup") as broken:
                raise ValueError("bad obs")
    for step in range(5):
        run.log_metrics({"train/episode_return": step * 1.5, "train/loss": 1.0 / (step + 1)},
                        step=step)
    assert run.finish() is True
    rid, tid = run.run_id, root.trace_id

    info = _ok(server.get("/api/runs/%s" % rid))
    assert info["project"] == "sdk-tests" and info["name"] == "ppo-seed-42"
    assert info["status"] == "finished"
    assert info["config"]["seed"] == 42 and info["config"]["api_key"] == "[REDACTED]"
    assert {"train/episode_return", "train/loss"} <= set(info["metric_keys"])

    traces = _ok(server.get("/api/runs/%s/traces" % rid))["traces"]
    assert len(traces) == 1
    t = traces[0]
    assert t["trace_id"] == tid and t["root_span_id"] == root.span_id
    assert t["name"] == "rollout episode 42" and t["kind"] == "rollout"
    assert t["status"] == "ok"  # a failed child does not change the root
    assert t["span_count"] == 4 and t["error_count"] == 1 and t["token_count"] == 12
    assert t["step"] == 42 and t["rollout_id"] == "ep-42"
    assert set(t["kinds"]) == {"rollout", "model", "env_step", "tool"}
    assert t["thread_id"] == "MainThread"

    roots = _ok(server.get("/api/runs/%s/traces/%s/spans" % (rid, tid)))["spans"]
    assert [s["span_id"] for s in roots] == [root.span_id]
    assert roots[0]["child_count"] == 3 and roots[0]["error_count"] == 1

    children = _ok(server.get("/api/runs/%s/traces/%s/spans?parent_span_id=%s"
                              % (rid, tid, root.span_id)))["spans"]
    assert [s["name"] for s in children] == ["policy.forward", "env.step", "lookup"]
    assert [s["status"] for s in children] == ["ok", "ok", "error"]
    assert all(s["step"] == 42 for s in children)

    detail = _ok(server.get("/api/runs/%s/traces/%s/spans/%s" % (rid, tid, policy.span_id)))
    assert detail["input"] == {"observation": [0.0, 0.1, 0.2, 0.3]}
    assert detail["output"] == {"action": 1}
    assert detail["token_count"] == 12 and detail["kind"] == "model"
    assert detail["path"] == [root.span_id]

    detail = _ok(server.get("/api/runs/%s/traces/%s/spans/%s" % (rid, tid, env_step.span_id)))
    assert detail["input"] is None and detail["output"] is None  # capture="off"
    assert detail["metrics"] == {"reward": 1.0}
    assert detail["attributes"]["terminated"] is False

    detail = _ok(server.get("/api/runs/%s/traces/%s/spans/%s" % (rid, tid, broken.span_id)))
    assert detail["error"]["type"] == "ValueError"
    assert detail["error"]["message"] == "bad obs"  # preview was inherited from the root

    status, body = server.get("/api/runs/%s/traces/%s/spans/%s" % (rid, tid, "0" * 16))
    assert status == 404 and body["error"]["code"] == "span_not_found"

    series = _ok(server.get("/api/runs/%s/metrics?key=%s"
                            % (rid, urllib.parse.quote("train/episode_return", safe=""))))
    assert series["points"] == [[s, s * 1.5] for s in range(5)]


def test_secrets_are_redacted_before_they_reach_the_server(server, tmp_path):
    run = _run(server, tmp_path, capture="preview")

    @run.trace_op(name="call billing api", kind="tool")
    def call_api(payload, headers, api_key):
        return {"status": 200, "secret": "returned-secret-value-1",
                "echo": "key was sk-live-abcdefghijklmnop"}

    with run.trace("agent turn", kind="agent") as root:
        call_api({"q": "invoice"}, headers={"Authorization": "Bearer abc.def-ghi123456"},
                 api_key="sk-live-abcdefghijklmnop")
    assert run.finish() is True
    rid, tid = run.run_id, root.trace_id
    children = _ok(server.get("/api/runs/%s/traces/%s/spans?parent_span_id=%s"
                              % (rid, tid, root.span_id)))["spans"]
    assert [c["name"] for c in children] == ["call billing api"]
    detail = _ok(server.get("/api/runs/%s/traces/%s/spans/%s"
                            % (rid, tid, children[0]["span_id"])))
    assert detail["input"]["headers"]["Authorization"] == "[REDACTED]"
    assert detail["input"]["api_key"] == "[REDACTED]"
    assert detail["input"]["payload"] == {"q": "invoice"}
    assert detail["output"]["secret"] == "[REDACTED]"
    assert detail["output"]["status"] == 200
    assert detail["output"]["echo"] == "key was [REDACTED]"
    everything = json.dumps(detail)
    for secret in ("abc.def-ghi123456", "sk-live-abcdefghijklmnop", "returned-secret-value-1"):
        assert secret not in everything
