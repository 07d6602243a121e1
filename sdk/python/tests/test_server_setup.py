"""Against a real server: a URL that cannot work raises at init, and a key the server
refuses is said once, counted, kept in the spool and sent later with a new key."""

import json
import logging
import secrets
import time
import urllib.error
import urllib.request

import pytest

import treeline as tl
from treeline.sync import main as sync_main

from conftest import create_key

pytestmark = pytest.mark.server


def test_a_url_without_a_scheme_raises_at_init_and_the_url_it_suggests_works(
        server, tmp_path, monkeypatch):
    address = server.url[len("http://"):]  # 127.0.0.1:PORT, as a new user wrote it
    with pytest.raises(ValueError) as err:
        tl.init("setup", url=address, spool_dir=str(tmp_path), finish_on_exit=False)
    assert str(err.value) == "url %r has no scheme: write %r" % (address, server.url)
    monkeypatch.setenv("TREELINE_URL", address)
    with pytest.raises(ValueError) as err:
        tl.init("setup", spool_dir=str(tmp_path), finish_on_exit=False)
    assert str(err.value) == "TREELINE_URL %r has no scheme: write %r" % (address, server.url)

    monkeypatch.setenv("TREELINE_URL", server.url + "/")  # the suggestion; a slash is fine
    run = tl.init("setup", spool_dir=str(tmp_path), finish_on_exit=False)
    with run.trace("works") as root:
        pass
    assert run.finish() is True
    status, body = server.get("/api/runs/%s/traces/%s" % (run.run_id, root.trace_id))
    assert status == 200 and body["name"] == "works"


def test_a_url_with_a_path_raises_at_init_naming_the_address_to_give(server, tmp_path):
    url = server.url + "/traces"
    message = "has a path '/traces': give the server's address only, %r" % server.url
    with pytest.raises(ValueError) as err:
        tl.init("setup", url=url, spool_dir=str(tmp_path), finish_on_exit=False)
    assert str(err.value) == "url %r %s" % (url, message)
    with pytest.raises(ValueError, match="has a path '/traces'"):
        tl.Client(url)


@pytest.fixture
def keyed(server_factory, tmp_path):
    """A server with keys: a write key, a read key, and a key of project 'alpha'."""
    data = tmp_path / "data"
    proc = server_factory(data_dir=str(data)).start()
    keys = {"write": create_key(data, "write"), "read": create_key(data, "read"),
            "project": create_key(data, "write", project="alpha"),
            "wrong": "tl_" + secrets.token_urlsafe(32), "none": None}
    return proc, keys


def _answer(url, key):
    """The server's own error message for this key writing a run of project 'beta'."""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    req = urllib.request.Request(url + "/api/runs/probe-" + secrets.token_hex(4),
                                 data=b'{"project": "beta"}', headers=headers, method="PUT")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    return err.value.code, json.loads(err.value.read())["error"]["message"]


@pytest.mark.parametrize("which", ["read", "wrong", "none", "project"])
def test_a_refused_key_is_said_once_and_its_data_kept_for_a_new_key(
        keyed, which, tmp_path, caplog, capsys):
    server, keys = keyed
    status, message = _answer(server.url, keys[which])
    assert status in (401, 403)
    run = tl.init("beta", url=server.url, api_key=keys[which],
                  spool_dir=str(tmp_path / "spool"), finish_on_exit=False)
    with run.trace("episode", kind="rollout") as root:
        with root.span("policy", kind="model"):
            pass
    run.log_metrics({"loss": 0.5}, step=0)
    start = time.monotonic()
    assert run.flush(30) is False  # kept on disk ...
    assert time.monotonic() - start < 10  # ... at once, not after a flush timeout
    assert run.counters()["refused_requests"] >= 1
    said = [r for r in caplog.records if "refused this run's data" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.ERROR
    assert "HTTP %d" % status in said[0].getMessage() and message in said[0].getMessage()
    assert "TREELINE_API_KEY" in said[0].getMessage()
    assert not [r for r in caplog.records if "unreachable" in r.getMessage()]

    # The same key again: the sync says a new key is needed and leaves the files.
    args = [run.spool_dir, "--url", server.url] + (
        ["--api-key", keys[which]] if keys[which] else [])
    assert sync_main(args) == 1
    out = capsys.readouterr().out
    assert "A new key is needed" in out and message in out
    # A write key sends what the run kept.
    assert sync_main([run.spool_dir, "--url", server.url, "--api-key", keys["write"]]) == 0
    client = tl.Client(server.url, api_key=keys["write"])
    assert client.run(run.run_id)["project"] == "beta"
    assert client.trace(run.run_id, root.trace_id)["span_count"] == 2
    assert client.metrics(run.run_id, "loss")["points"] == [[0, 0.5]]
