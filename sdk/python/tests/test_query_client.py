"""treeline.Client, the read side: against a scripted stand-in server (retries, errors,
encoding) and against a real `treeline serve` (filters, sorting, paging, auth)."""

import gzip
import http.server
import itertools
import json
import secrets

import pytest

import treeline as tl
from fakeserver import free_port, serve_in_thread, stop_serving


# -- a scripted stand-in -------------------------------------------------------------

class Stub:
    """Answers GETs from `script`, a list of (status, headers, body); once it is used up,
    every answer is 200 {"ok": true}. Records each request's raw path and headers."""

    def __init__(self):
        self.script = []
        self.requests = []
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                stub.requests.append((self.path, dict(self.headers)))
                if stub.script:
                    status, headers, body = stub.script.pop(0)
                else:
                    status, headers, body = 200, {}, {"ok": True}
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                headers = dict(headers)
                headers.setdefault("Content-Type", "application/json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd, self.url = serve_in_thread(Handler)

    def stop(self):
        stop_serving(self.httpd)


@pytest.fixture
def stub():
    s = Stub()
    yield s
    s.stop()


def _err(code, message):
    return {"error": {"code": code, "message": message}}


def _client(url, **kw):
    client = tl.Client(url, **kw)
    client.waits = []
    client._sleep = client.waits.append  # record waits instead of sleeping
    return client


def test_url_and_key_come_from_the_environment_like_init(monkeypatch, stub):
    assert tl.Client().url == "http://127.0.0.1:3000"
    monkeypatch.setenv("TREELINE_URL", stub.url + "/")
    monkeypatch.setenv("TREELINE_API_KEY", "tl_from-env")
    client = tl.Client()
    assert client.url == stub.url and client.api_key == "tl_from-env"
    assert client.run("r1") == {"ok": True}
    path, headers = stub.requests[-1]
    assert path == "/api/runs/r1"
    assert headers["Authorization"] == "Bearer tl_from-env"
    assert headers["User-Agent"].startswith("treeline-python/")
    # Given values win over the environment.
    assert tl.Client("http://example.invalid:1", api_key="k").api_key == "k"
    with pytest.raises(ValueError):
        tl.Client("localhost:3000")


def test_path_segments_and_query_values_are_percent_encoded(stub):
    client = _client(stub.url)
    stub.script = [(200, {}, {"traces": [], "next_cursor": None})]
    assert list(client.traces(run_id="run 1/x", filter=["attr.reward < 0.5", "error_count>0"],
                              sort="attr.reward", order="asc", status=["ok", "error"],
                              kind="tool", q="a&b=c", min_step=2, max_step=9,
                              page_size=7)) == []
    path = stub.requests[-1][0]
    assert path == ("/api/runs/run%201%2Fx/traces?filter=attr.reward%20%3C%200.5"
                    "&filter=error_count%3E0&sort=attr.reward&order=asc&status=ok%2Cerror"
                    "&kind=tool&q=a%26b%3Dc&min_step=2&max_step=9&limit=7")
    client.metrics("r", "train/loss", max_points=10)
    assert stub.requests[-1][0] == "/api/runs/r/metrics?key=train%2Floss&max_points=10"
    list(client.spans("r", "t", parent="s"))
    assert stub.requests[-1][0] == "/api/runs/r/traces/t/spans?parent_span_id=s&limit=1000"
    list(client.traces())
    assert stub.requests[-1][0] == "/api/traces?limit=500"
    assert "Authorization" not in stub.requests[-1][1]


def test_pages_are_fetched_lazily_and_followed_to_the_end(stub):
    client = _client(stub.url)
    stub.script = [(200, {}, {"runs": [{"run_id": "a"}, {"run_id": "b"}], "next_cursor": "c/1"}),
                   (200, {}, {"runs": [{"run_id": "c"}], "next_cursor": None})]
    runs = client.runs(project="p", page_size=2)
    assert stub.requests == []  # nothing is sent before the first item is asked for
    assert next(runs)["run_id"] == "a" and next(runs)["run_id"] == "b"
    assert len(stub.requests) == 1
    assert [r["run_id"] for r in runs] == ["c"]
    assert [p for p, _ in stub.requests] == ["/api/runs?project=p&limit=2",
                                             "/api/runs?project=p&limit=2&cursor=c%2F1"]


def test_503_is_retried_after_retry_after_and_4xx_never(stub):
    client = _client(stub.url)
    busy = (503, {"Retry-After": "2"}, _err("unavailable", "busy"))
    stub.script = [busy, (503, {"Retry-After": "120"}, _err("unavailable", "busy")),
                   (200, {}, {"projects": []})]
    assert client.projects() == []
    assert len(stub.requests) == 3 and client.waits == [2, 30]  # bounded to 30 s

    stub.requests.clear()
    client.waits.clear()
    stub.script = [busy] * 5
    with pytest.raises(tl.ApiError) as info:
        client.run("r")
    assert len(stub.requests) == 4 and client.waits == [2, 2, 2]  # 3 retries, then raise
    assert info.value.status == 503 and info.value.code == "unavailable"

    for status in (400, 404, 408, 429):
        stub.requests.clear()
        stub.script = [(status, {"Retry-After": "1"}, _err("nope", "no")), busy]
        with pytest.raises(tl.ApiError):
            client.run("r")
        assert len(stub.requests) == 1, status


def test_errors_carry_status_code_and_message(stub):
    client = _client(stub.url)
    stub.script = [(404, {}, _err("run_not_found", "run r-404 not found"))]
    with pytest.raises(tl.NotFound) as info:
        client.run("r-404")
    err = info.value
    assert (err.status, err.code, err.message) == (404, "run_not_found", "run r-404 not found")
    assert str(err) == "HTTP 404 run_not_found: run r-404 not found"
    assert isinstance(err, tl.ApiError)

    for status in (401, 403):
        stub.script = [(status, {}, _err("unauthorized", "the API key is not valid"))]
        with pytest.raises(tl.AuthError) as info:
            client.projects()
        assert info.value.status == status and not isinstance(info.value, tl.NotFound)

    stub.script = [(502, {"Content-Type": "text/html"}, b"<h1>Bad Gateway</h1>")]
    with pytest.raises(tl.ApiError) as info:
        client.projects()
    assert info.value.status == 502 and info.value.code is None
    assert "Bad Gateway" in info.value.message and "/api/projects" in str(info.value)

    stub.script = [(200, {"Content-Type": "text/html"}, b"<html>a dashboard</html>")]
    with pytest.raises(tl.ApiError) as info:
        client.projects()
    assert info.value.code == "invalid_response"


def test_gzip_answers_are_decoded(stub):
    client = _client(stub.url)
    body = gzip.compress(json.dumps({"projects": [{"name": "p"}]}).encode())
    stub.script = [(200, {"Content-Encoding": "gzip"}, body)]
    assert client.projects() == [{"name": "p"}]
    assert "gzip" in stub.requests[-1][1]["Accept-Encoding"]


def test_a_server_that_is_not_there_is_unreachable():
    client = _client("http://127.0.0.1:%d" % free_port(), timeout=2)
    with pytest.raises(tl.Unreachable) as info:
        client.projects()
    assert "/api/projects" in str(info.value)
    with pytest.raises(tl.Unreachable):
        next(client.traces())


def test_arguments_are_checked_at_the_call():
    client = tl.Client("http://127.0.0.1:1")
    with pytest.raises(ValueError):
        client.traces(page_size=0)
    with pytest.raises(TypeError):
        client.traces(filter=3)
    with pytest.raises(TypeError):
        client.traces(min_step="2")
    with pytest.raises(TypeError):
        client.spans("r", None)
    with pytest.raises(TypeError):
        client.spans("r", "t", start=1, around="s")
    with pytest.raises(TypeError):
        client.spans("r", "t", start=-1)
    with pytest.raises(TypeError):
        client.metrics("r", "")


# -- against a real server ----------------------------------------------------------

REWARDS = [0.9, 0.2, 0.4, 0.7, "high", 0.1]  # trace i gets REWARDS[i]
# Root names: words, not digits, so that a search term cannot also be a prefix of a
# (hex) trace id.
NAMES = ["zero", "one", "two", "three", "four", "five"]
FAILING = {1, 3, 5}  # traces with a failed tool call beneath the root
ROOT_ERROR = 3  # this one's root fails too


@pytest.fixture(scope="module")
def written(server, tmp_path_factory):
    """One run of six traces, written with the SDK; returns what the tests look for."""
    tag = secrets.token_hex(4)
    project = "query-client-" + tag
    run = tl.init(project, name="grpo math " + tag, url=server.url, disabled=False,
                  sample_rate=1.0, finish_on_exit=False,
                  spool_dir=str(tmp_path_factory.mktemp("spool")))
    traces = []
    for i, reward in enumerate(REWARDS):
        with run.trace("episode " + NAMES[i], kind="rollout", step=i, capture="preview",
                       attributes={"reward": reward, "task": "math"},
                       inputs={"episode": i}) as root:
            with root.span("policy", kind="model", inputs={"obs": [i, i + 1]}) as policy:
                policy.set_output({"action": i % 2})
                policy.token_count = 10 + i
            with root.span("env.step", kind="env_step") as env_step:
                env_step.log_metric("reward", 1.0)
            if i in FAILING:
                with root.tool("lookup") as tool:
                    tool.set_status("error")
            if i == ROOT_ERROR:
                root.set_status("error")
        traces.append({"trace_id": root.trace_id, "root": root.span_id,
                       "policy": policy.span_id, "env_step": env_step.span_id})
    for step in range(5):
        run.log_metrics({"train/loss": 1.0 / (step + 1)}, step=step)
    assert run.finish() is True
    return {"tag": tag, "project": project, "run_id": run.run_id, "traces": traces}


def _ids(traces, written):
    index = {t["trace_id"]: i for i, t in enumerate(written["traces"])}
    return [index[t["trace_id"]] for t in traces]


@pytest.mark.server
def test_runs_projects_and_run(server, written):
    client = tl.Client(server.url)
    found = list(client.runs(q="MATH " + written["tag"]))  # case-insensitive, spaces kept
    assert [r["run_id"] for r in found] == [written["run_id"]]
    assert found[0]["trace_count"] == 6 and found[0]["error_trace_count"] == 3
    assert [r["run_id"] for r in client.runs(project=written["project"])] == [written["run_id"]]
    assert list(client.runs(q="no-such-run-" + written["tag"])) == []
    # Every run, across pages of one.
    everything = [r["run_id"] for r in client.runs(page_size=1)]
    assert written["run_id"] in everything and len(everything) == len(set(everything))

    project = [p for p in client.projects() if p["name"] == written["project"]]
    assert project and project[0]["runs"] == 1 and project[0]["traces"] == 6

    info = client.run(written["run_id"])
    assert info["project"] == written["project"] and info["status"] == "finished"
    assert info["metric_keys"] == ["train/loss"]


@pytest.mark.server
def test_trace_filters(server, written):
    client = tl.Client(server.url)
    rid = written["run_id"]

    def ids(**kw):
        return sorted(_ids(client.traces(**kw), written))

    assert ids(run_id=rid) == [0, 1, 2, 3, 4, 5]
    assert ids(run_id=rid, filter="attr.reward < 0.5") == [1, 2, 5]
    assert ids(run_id=rid, filter="error_count > 0") == [1, 3, 5]
    assert ids(run_id=rid, filter=["attr.reward < 0.5", "error_count > 0"]) == [1, 5]
    assert ids(run_id=rid, filter='attr.reward = "high"') == [4]
    assert ids(run_id=rid, filter=("attr.reward exists", "attr.reward >= 0.4")) == [0, 2, 3]
    # The global list, by project, takes the same filters.
    assert ids(project=written["project"], filter="attr.reward < 0.5") == [1, 2, 5]
    assert ids(status="error", run_id=rid) == [3]
    assert ids(status=["ok", "error"], run_id=rid) == [0, 1, 2, 3, 4, 5]
    assert ids(kind="tool", run_id=rid) == [1, 3, 5]
    assert ids(kind=["tool", "model"], run_id=rid) == [0, 1, 2, 3, 4, 5]
    assert ids(q="episode four", run_id=rid) == [4]
    assert ids(q="EPISODE", project=written["project"]) == [0, 1, 2, 3, 4, 5]
    assert ids(min_step=2, max_step=4, run_id=rid) == [2, 3, 4]

    one = client.trace(rid, written["traces"][3]["trace_id"])
    assert one["status"] == "error" and one["error_count"] == 2


@pytest.mark.server
def test_sorting_by_an_attribute_and_paging(server, written):
    client = tl.Client(server.url)
    rid = written["run_id"]
    # Numbers in order; the string "high" is not a number and comes last either way.
    asc = _ids(client.traces(run_id=rid, sort="attr.reward", order="asc"), written)
    assert asc == [5, 1, 2, 3, 0, 4]
    desc = _ids(client.traces(run_id=rid, sort="attr.reward", order="desc"), written)
    assert desc == [0, 3, 2, 1, 5, 4]
    assert _ids(client.traces(run_id=rid, sort="errors", order="desc"), written)[0] == 3

    calls = []
    request = client._request

    def counting(target):
        calls.append(target)
        return request(target)

    client._request = counting
    paged = _ids(client.traces(run_id=rid, sort="attr.reward", order="asc", page_size=2),
                 written)
    assert paged == asc  # every trace once, in the same order
    assert len(calls) >= 3 and all("limit=2" in c for c in calls)
    assert "cursor=" not in calls[0] and all("cursor=" in c for c in calls[1:])
    for order in ("asc", "desc"):
        seen = _ids(client.traces(run_id=rid, order=order, page_size=2), written)
        assert sorted(seen) == [0, 1, 2, 3, 4, 5]

    calls.clear()  # stopping early sends no more requests
    first = list(itertools.islice(client.traces(run_id=rid, page_size=2), 2))
    assert len(first) == 2 and len(calls) == 1


@pytest.mark.server
def test_spans_span_metrics_and_attribute_keys(server, written):
    client = tl.Client(server.url)
    rid = written["run_id"]
    t = written["traces"][1]
    roots = list(client.spans(rid, t["trace_id"]))
    assert [s["span_id"] for s in roots] == [t["root"]]
    assert roots[0]["child_count"] == 3 and roots[0]["error_count"] == 1
    children = list(client.spans(rid, t["trace_id"], parent=t["root"]))
    assert [s["name"] for s in children] == ["policy", "env.step", "lookup"]
    assert [s["status"] for s in children] == ["ok", "ok", "error"]
    assert list(client.spans(rid, t["trace_id"], parent=t["root"], page_size=1)) == children
    # Jumping within a level: from a place, around a child, by a few letters of a name;
    # each followed to the level's end, a page at a time.
    assert list(client.spans(rid, t["trace_id"], parent=t["root"], page_size=1,
                             start=1)) == children[1:]
    assert list(client.spans(rid, t["trace_id"], parent=t["root"], page_size=1,
                             around=t["env_step"])) == children[1:]
    # A page of 2 around the second child starts one before it.
    assert list(client.spans(rid, t["trace_id"], parent=t["root"], page_size=2,
                             around=t["env_step"])) == children
    assert [s["name"] for s in client.spans(rid, t["trace_id"], parent=t["root"],
                                            name="ENV")] == ["env.step"]

    detail = client.span(rid, t["trace_id"], t["policy"])
    assert detail["input"] == {"obs": [1, 2]} and detail["output"] == {"action": 1}
    assert detail["token_count"] == 11 and detail["path"] == [t["root"]]
    root = client.span(rid, t["trace_id"], t["root"])
    assert root["input"] == {"episode": 1} and root["attributes"]["reward"] == 0.2
    assert client.span(rid, t["trace_id"], t["env_step"])["metrics"] == {"reward": 1.0}

    series = client.metrics(rid, "train/loss")
    assert series["key"] == "train/loss" and series["downsampled"] is False
    assert series["points"] == [[s, 1.0 / (s + 1)] for s in range(5)]
    small = client.metrics(rid, "train/loss", max_points=2)
    assert small["downsampled"] is True and len(small["points"]) <= 2
    assert client.metrics(rid, "no/such/key")["points"] == []

    keys = {(a["key"], a["kind"]): a for a in client.attribute_keys(rid)}
    assert keys[("reward", "number")]["min"] == 0.1 and keys[("reward", "number")]["max"] == 0.9
    assert keys[("reward", "string")]["values"] == [{"value": "high", "traces": 1}]
    assert keys[("task", "string")]["traces"] == 6


@pytest.mark.server
def test_errors_from_the_server(server, written):
    client = tl.Client(server.url)
    rid = written["run_id"]
    with pytest.raises(tl.ApiError) as info:
        list(client.traces(run_id=rid, filter="reward > 1"))
    err = info.value
    assert err.status == 400 and err.code == "bad_filter"
    assert "reward > 1" in err.message and "reward > 1" in str(err)
    assert not isinstance(err, (tl.NotFound, tl.AuthError))
    with pytest.raises(tl.ApiError) as info:
        list(client.traces(run_id=rid, filter=["attr.x exists"] * 9))
    assert info.value.code == "bad_filter"
    with pytest.raises(tl.ApiError) as info:
        list(client.traces(run_id=rid, sort="colour"))
    assert info.value.code == "invalid_parameter"

    with pytest.raises(tl.NotFound) as info:
        client.run("no-such-run-" + written["tag"])
    assert info.value.status == 404 and info.value.code == "run_not_found"
    with pytest.raises(tl.NotFound):
        list(client.traces(run_id="no-such-run-" + written["tag"]))
    with pytest.raises(tl.NotFound) as info:
        client.span(rid, written["traces"][0]["trace_id"], "0" * 16)
    assert info.value.code == "span_not_found"
    with pytest.raises(tl.NotFound) as info:
        list(client.spans(rid, "f" * 32))
    assert info.value.code == "trace_not_found"


@pytest.mark.server
def test_a_server_with_a_key(server_factory, tmp_path, monkeypatch):
    key = "tl_" + secrets.token_urlsafe(32)
    key_file = tmp_path / "keys"
    key_file.write_text("# test key\n%s\n" % key)
    keyed = server_factory(data_dir=str(tmp_path / "data"),
                           args=["--api-key-file", str(key_file)]).start()
    run = tl.init("keyed", name="keyed run", url=keyed.url, api_key=key, disabled=False,
                  finish_on_exit=False, spool_dir=str(tmp_path / "spool"))
    with run.trace("t", attributes={"reward": 1.0}):
        pass
    assert run.finish() is True

    with pytest.raises(tl.AuthError) as info:
        tl.Client(keyed.url).projects()
    assert info.value.status == 401 and info.value.code == "unauthorized"
    with pytest.raises(tl.AuthError) as info:
        list(tl.Client(keyed.url, api_key="tl_wrong").runs())
    assert info.value.message == "the API key is not valid"

    client = tl.Client(keyed.url, api_key=key)
    assert [p["name"] for p in client.projects()] == ["keyed"]
    assert [r["run_id"] for r in client.runs()] == [run.run_id]
    assert len(list(client.traces(run_id=run.run_id, filter="attr.reward >= 1"))) == 1

    monkeypatch.setenv("TREELINE_URL", keyed.url)
    monkeypatch.setenv("TREELINE_API_KEY", key)
    assert tl.Client().run(run.run_id)["name"] == "keyed run"


@pytest.mark.server
def test_two_traces_align_and_diff(server, written):
    client = tl.Client(server.url)
    rid = written["run_id"]
    one, two = written["traces"][0], written["traces"][1]
    level = client.align(rid, (one["trace_id"], one["root"]), (two["trace_id"], two["root"]))
    rows = [(r["a"] and r["a"]["name"], r["b"] and r["b"]["name"], r["change"])
            for r in level["rows"]]
    # Episode 1 failed a lookup that episode 0 never made.
    assert rows[0][:2] == ("policy", "policy") and rows[0][2] == "changed"
    assert rows[-1] == (None, "lookup", "only_b")
    assert "output" in level["rows"][0]["differences"]
    diff = client.diff(rid, (one["trace_id"], one["policy"]), (two["trace_id"], two["policy"]))
    output = [b for b in diff["bodies"] if b["body"] == "output"][0]
    assert output["same"] is False and output["mode"] == "json"
    assert output["changes"] == [{"path": "$.action", "a": 0, "b": 1}]
    assert client.rollouts(rid, one["trace_id"]) == []
    with pytest.raises(TypeError):
        client.align(rid, one["trace_id"], two["trace_id"])
    with pytest.raises(tl.NotFound):
        client.diff(rid, (one["trace_id"], "nope"), (two["trace_id"], two["policy"]))
