"""A tracer anchored to a project alone (`tl.tracer(project)`): its traces go to the
project's run of the day, the run the server gives that project's OpenTelemetry spans,
checked against a real `treeline serve`, with and without keys."""

import datetime
import json
import secrets
import time
import urllib.parse

import pytest

import treeline as tl
from treeline.project import daily_run_id
from conftest import create_key


def _today():
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


def test_the_daily_id_is_the_servers_for_plain_and_changed_project_names():
    assert daily_run_id("my-agent", "2025-11-29") == "my-agent-2025-11-29"
    changed = daily_run_id("My Agent!", "2025-11-29")
    assert changed.startswith("My-Agent--") and changed.endswith("-2025-11-29")
    assert daily_run_id("!!!", "2025-11-29").startswith("otel-")


@pytest.mark.server
def test_a_project_tracer_writes_its_traces_to_the_projects_run_of_the_day(server, tmp_path):
    project = "svc-" + secrets.token_hex(3)
    tracer = tl.tracer(project, url=server.url, spool_dir=str(tmp_path), quiet=True)
    with tracer.agent_trace("handle request", task_input={"q": "refund order 7"}) as root:
        with root.llm_call("planner", prompt="what to do") as llm:
            llm.output("call the refund tool")
        with root.tool_call("refund", input={"order": 7}) as tool:
            tool.output({"ok": True})
        root.final_output("refunded")
    with pytest.raises(tl.InvalidValue, match="no step"):
        tracer.trace("nightly eval", step=3)
    assert tracer.flush()

    client = tl.Client(server.url)
    runs = list(client.runs(project=project))
    assert [r["run_id"] for r in runs] == [tracer.run_id]
    assert runs[0]["name"] == "%s %s (OpenTelemetry)" % (project, _today())
    # The id is the one the server's OTLP route gives the project (no one else holds it).
    assert tracer.run_id == daily_run_id(project, _today())
    traces = list(client.traces(run_id=tracer.run_id))
    assert [(t["name"], t["kind"], t["span_count"]) for t in traces] == [
        ("handle request", "agent", 3)]

    # A second tracer of the project, another process say, writes beside it.
    other = tl.tracer(project, url=server.url, spool_dir=str(tmp_path), quiet=True)
    assert other.run_id == tracer.run_id
    with other.trace("nightly eval", kind="evaluator"):
        pass
    assert other.flush()
    assert sorted(t["name"] for t in client.traces(run_id=tracer.run_id)) == [
        "handle request", "nightly eval"]


@pytest.mark.server
def test_the_fallback_id_is_the_one_the_server_gives_for_any_project_name(server):
    # What the tracer writes to when the server is down must be where the server
    # would have put it: the same slug and hash rules, names changed to fit included.
    client = tl.Client(server.url)
    for project in ["My Agent!", "--eval suite (nightly)", "ünïcode-proj", "p" * 60]:
        placed = client._write("POST", "/api/projects/%s/daily-run"
                               % urllib.parse.quote(project, safe=""), {})
        assert placed["run_id"] == daily_run_id(project, placed["date"]), project


@pytest.mark.server
def test_a_project_key_places_only_its_own_project(server_factory, tmp_path):
    data = tmp_path / "data"
    proc = server_factory(data_dir=str(data)).start()
    alpha = create_key(data, "write", project="alpha")
    reader = create_key(data, "read")
    tracer = tl.tracer("alpha", url=proc.url, api_key=alpha, spool_dir=str(tmp_path),
                       quiet=True)
    with tracer.trace("served"):
        pass
    assert tracer.flush()
    # Another project's run of the day, or any with a read key: refused at setup,
    # as the SDK's own error family.
    with pytest.raises(tl.TreelineError) as refused:
        tl.tracer("beta", url=proc.url, api_key=alpha, spool_dir=str(tmp_path), quiet=True)
    assert refused.value.status == 403 and "alpha" in str(refused.value)
    with pytest.raises(tl.AuthError):
        tl.tracer("alpha", url=proc.url, api_key=reader, spool_dir=str(tmp_path), quiet=True)
    listed = list(tl.Client(proc.url, alpha).traces(run_id=tracer.run_id))
    assert [t["name"] for t in listed] == ["served"]


def test_a_switched_off_project_tracer_sends_nothing_and_asks_nothing():
    tracer = tl.tracer("quiet-svc", url="http://127.0.0.1:1", disabled=True)
    with tracer.trace("ignored") as root:
        assert not root.is_recording
    assert tracer.run_id == daily_run_id("quiet-svc", _today())
    assert tracer.flush()


def test_an_unreachable_server_does_not_hold_the_start_the_daily_id_is_used(
        caplog, transport, tmp_path):
    started = time.monotonic()
    with caplog.at_level("WARNING", logger="treeline"):
        tracer = tl.tracer("svc-down", url="http://127.0.0.1:1", quiet=True,
                           transport=transport, spool_dir=str(tmp_path))
    assert time.monotonic() - started < 2
    assert tracer.run_id == daily_run_id("svc-down", _today())
    warned = [r.getMessage() for r in caplog.records if "its run of the day" in r.getMessage()]
    assert len(warned) == 1 and tracer.run_id in warned[0], caplog.text


def test_a_project_tracer_takes_no_run_of_its_own():
    with pytest.raises(tl.InvalidValue, match="run of the day"):
        tl.tracer("svc", run_id="mine", disabled=True)


class _Days:
    """Stands in for the project module's datetime: a UTC date the test moves on."""

    def __init__(self, day):
        self.day = day
        outer = self

        class _Now:
            def date(self):
                return outer

        class _DateTime:
            @staticmethod
            def now(tz=None):
                return _Now()

        self.datetime = _DateTime
        self.timezone = datetime.timezone

    def isoformat(self):
        return self.day


def test_a_new_utc_day_moves_new_traces_to_that_days_run_and_keeps_open_ones_whole(
        monkeypatch, transport, tmp_path):
    import treeline.project as project

    days = _Days("2026-12-04")
    monkeypatch.setattr(project, "datetime", days)
    placed = []

    class _Server:
        def __init__(self, url, api_key, timeout=None):
            pass

        def _request(self, path, method, data, key):
            placed.append((method, path))
            return 200, json.dumps({"run_id": "svc-%s" % days.day}).encode(), None

        def _answer(self, method, path, status, body):
            return json.loads(body)

    monkeypatch.setattr(project, "Client", _Server)
    tracer = tl.tracer("svc", url="http://127.0.0.1:1", transport=transport,
                       spool_dir=str(tmp_path), flush_interval=0.05, quiet=True)
    assert tracer.run_id == "svc-2026-12-04"
    late = tracer.trace("before midnight")
    late.__enter__()
    days.day = "2026-12-05"
    with tracer.trace("after midnight"):
        pass
    # The span opened before midnight finishes in the run its root opened in.
    with late.span("its last step"):
        pass
    late.__exit__(None, None, None)
    assert tracer.flush()
    assert tracer.run_id == "svc-2026-12-05"
    assert placed == [("POST", "/api/projects/svc/daily-run")] * 2
    runs = {(r["path"].split("/")[3], e["name"])
            for r in transport.sent if r["path"].endswith("/traces/events")
            for e in r["body"]["events"] if e["op"] == "open"}
    assert runs == {("svc-2026-12-04", "before midnight"), ("svc-2026-12-04", "its last step"),
                    ("svc-2026-12-05", "after midnight")}
