"""Against a real server: outage and replay without duplicates; sampling; switched off."""

import os
import shutil
import subprocess
import sys

import pytest

import treeline as tl
from fakeserver import free_port

pytestmark = pytest.mark.server


def _ok(result):
    status, body = result
    assert status == 200, body
    return body


def _traces(server, run_id):
    return _ok(server.get("/api/runs/%s/traces?limit=500" % run_id))["traces"]


def test_server_down_spool_server_up_replay_without_duplicates(server_factory, tmp_path):
    port = free_port()
    url = "http://127.0.0.1:%d" % port  # nothing listens here yet
    spool = tmp_path / "spool"
    run = tl.init("sdk-outage", url=url, spool_dir=str(spool), max_retries=0,
                  finish_on_exit=False)
    roots = []
    for i in range(5):
        with run.trace("rollout %d" % i, kind="rollout", step=i) as root:
            with root.span("policy", kind="model"):
                pass
            with root.span("env.step", kind="env_step"):
                pass
        roots.append(root)
        run.log_metrics({"train/return": float(i)}, step=i)
    assert run.flush(20) is False  # nothing could be delivered
    files = sorted(os.listdir(spool / run.run_id))
    assert files, "nothing was spooled"
    shutil.copytree(spool, tmp_path / "copy")

    (tmp_path / "data").mkdir()
    server = server_factory(port=port, data_dir=str(tmp_path / "data")).start()
    assert run.flush(30) is True  # the next flush replays the spool
    assert not [f for f in os.listdir(spool / run.run_id) if f.endswith(".tlspool")]

    # Replaying the very same files again, as `treeline-sync` would after a crash,
    # must store nothing twice: each request keeps its Idempotency-Key.
    done = subprocess.run([sys.executable, "-m", "treeline.sync", str(tmp_path / "copy"),
                           "--url", server.url], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert run.finish() is True

    traces = _traces(server, run.run_id)
    assert sorted(t["trace_id"] for t in traces) == sorted(r.trace_id for r in roots)
    assert all(t["span_count"] == 3 and t["status"] == "ok" for t in traces)
    series = _ok(server.get("/api/runs/%s/metrics?key=train%%2Freturn" % run.run_id))
    assert series["points"] == [[i, float(i)] for i in range(5)]
    assert _ok(server.get("/api/runs/%s" % run.run_id))["status"] == "finished"

    # And the data survives a restart of the server on the same data directory.
    server.stop()
    server.start()
    assert len(_traces(server, run.run_id)) == 5


def test_sampling_keeps_or_drops_whole_trees(server, tmp_path):
    none = tl.init("sdk-sampling", url=server.url, spool_dir=str(tmp_path),
                   sample_rate=0.0, finish_on_exit=False)
    half = tl.init("sdk-sampling", url=server.url, spool_dir=str(tmp_path),
                   sample_rate=0.5, finish_on_exit=False)
    kept = 0
    for i in range(200):
        for run in (none, half):
            with run.trace("r%d" % i, kind="rollout", step=i) as root:
                with root.span("child", kind="model"):
                    pass
            if run is half:
                kept += root.is_recording
        none.log_metrics({"loss": 1.0}, step=i)
    assert none.finish() and half.finish()
    assert _traces(server, none.run_id) == []
    assert len(_ok(server.get("/api/runs/%s/metrics?key=loss" % none.run_id))["points"]) == 200
    traces = _traces(server, half.run_id)
    assert len(traces) == kept and 50 < kept < 150
    assert all(t["span_count"] == 2 for t in traces)


def test_everything_off_sends_nothing(server, tmp_path):
    code = """
import treeline as tl
run = tl.init("sdk-disabled", run_id="disabled-run-0001")
with run.trace("root", kind="rollout") as root:
    with root.span("child"):
        pass
run.log_metrics({"loss": 1.0}, step=0)
run.finish()
"""
    env = dict(os.environ, TREELINE_OFF="1", TREELINE_URL=server.url,
               TREELINE_SPOOL_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    status, body = server.get("/api/runs/disabled-run-0001")
    assert status == 404 and body["error"]["code"] == "run_not_found"
    assert not list(tmp_path.iterdir())


def test_tracing_off_keeps_the_metrics(server, tmp_path):
    code = """
import treeline as tl
run = tl.init("sdk-disabled", name="curves only", run_id="tracing-off-run-0001")
with run.trace("root", kind="rollout") as root:
    with root.span("child"):
        pass
print(root.is_recording)
for step in range(3):
    run.log_metrics({"loss": 1.0 / (step + 1)}, step=step)
print(run.finish())
"""
    env = dict(os.environ, TREELINE_DISABLED="1", TREELINE_URL=server.url,
               TREELINE_SPOOL_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]
    info = _ok(server.get("/api/runs/tracing-off-run-0001"))
    assert info["name"] == "curves only" and info["status"] == "finished"
    assert info["trace_count"] == 0
    series = _ok(server.get("/api/runs/tracing-off-run-0001/metrics?key=loss"))
    assert series["points"] == [[0, 1.0], [1, 0.5], [2, 1.0 / 3]]