"""Batching, idempotency keys, retries, the spool and replay, the queue bound, exit."""

import glob
import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

import treeline as tl
from treeline.spool import Spool
from treeline.sync import main as sync_main

from conftest import MemoryTransport
from fakeserver import FakeServer

HERE = os.path.dirname(os.path.abspath(__file__))


def _many(run, n, capture="off"):
    for i in range(n):
        with run.trace("rollout %d" % i, kind="rollout", step=i, capture=capture) as root:
            with root.span("policy", kind="model"):
                pass


def test_events_are_batched_and_every_post_has_its_own_key(make_run, transport):
    run = make_run()
    _many(run, 500)
    run.log_metrics({"loss": 1.0}, step=1)
    assert run.flush()
    assert transport.sent[0]["method"] == "PUT" and transport.sent[0]["key"] is None
    posts = [r for r in transport.sent if r["method"] == "POST"]
    assert len(transport.events()) == 2000
    assert len(posts) < 20
    keys = [r["key"] for r in posts]
    assert all(keys) and len(set(keys)) == len(keys)
    assert any(r["encoding"] in ("gzip", "zstd") for r in posts)  # large bodies compressed


def test_a_batch_leaves_when_it_is_big_enough_not_only_on_the_timer(make_run, transport):
    run = make_run(flush_interval=30, batch_bytes=16 * 1024)
    _many(run, 200)
    deadline = time.monotonic() + 5
    while not transport.events() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert transport.events(), "nothing was sent before the 30 s timer"


def test_a_batch_leaves_on_age(make_run, transport):
    run = make_run(flush_interval=0.1)
    with run.trace("one"):
        pass
    deadline = time.monotonic() + 5
    while len(transport.events()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(transport.events()) == 2


def test_retries_reuse_the_idempotency_key(make_run, transport):
    run = make_run()
    run._sender.backoff = 0.01
    run.flush()
    transport.script = [503, "down", 429]
    with run.trace("retried"):
        pass
    assert run.flush()
    attempts = [a for a in transport.attempts if a[1].endswith("/traces/events")]
    assert len(attempts) == 4 and len({a[2] for a in attempts}) == 1
    assert len(transport.events()) == 2


def test_a_503_with_retry_after_is_retried_no_sooner_than_asked(make_run, transport):
    run = make_run()
    sender = run._sender
    sender.backoff = 0.01
    run.flush()
    waits = []
    real_wait = sender._sleep.wait
    sender._sleep.wait = lambda delay=None: (waits.append(delay), real_wait(0))[1]
    transport.script = [(503, 2), 503]
    with run.trace("shed"):
        pass
    assert run.flush()
    assert len(transport.events()) == 2
    # The backoff alone would wait about 0.01 s, then 0.02 s; the server asked 2 s.
    assert waits[0] >= 2
    assert waits[1] < 1


def test_a_poison_batch_in_the_spool_is_set_aside_and_the_rest_delivered(tmp_path, transport,
                                                                          monkeypatch):
    from treeline import spool as spool_mod
    from treeline.spool import Request
    monkeypatch.setattr(spool_mod, "MAX_ANSWERED_TRIES", 3)
    spool = Spool(str(tmp_path / "r1"), url="memory://")
    poison = json.dumps({"points": [{"key": "poison", "step": 1, "value": 1.0}]}).encode()
    good = json.dumps({"points": [{"key": "good", "step": 1, "value": 2.0}]}).encode()
    spool.write(Request("POST", "/api/runs/r1/metrics", poison, None, "k-poison", "metrics"))
    spool.write(Request("POST", "/api/runs/r1/metrics", good, None, "k-good", "metrics"))
    # The server keeps answering the first batch with a 500; it is retried, then set
    # aside, and the batch behind it goes through.
    transport.script = [500, 500, 500]
    assert spool.replay(transport) == (0, 2)
    assert spool.replay(transport) == (0, 2)
    assert spool.replay(transport) == (1, 0)
    assert spool.set_aside == 1
    assert [p["key"] for p in transport.points()] == ["good"]
    assert len(glob.glob(str(tmp_path / "r1" / "*.rejected"))) == 1
    assert not glob.glob(str(tmp_path / "r1" / "*.tries"))
    assert spool.pending() == []


def test_a_spool_waits_without_limit_while_the_server_is_down(tmp_path, transport,
                                                              monkeypatch):
    from treeline import spool as spool_mod
    from treeline.spool import Request
    monkeypatch.setattr(spool_mod, "MAX_ANSWERED_TRIES", 2)
    spool = Spool(str(tmp_path / "r1"), url="memory://")
    spool.write(Request("POST", "/api/runs/r1/metrics", b'{"points": []}', None, "k1", "metrics"))
    transport.down = True
    for _ in range(5):
        assert spool.replay(transport) == (0, 1)
    transport.down = False
    assert spool.replay(transport) == (1, 0)
    assert spool.set_aside == 0


def test_a_refused_batch_is_dropped_not_spooled(make_run, transport):
    run = make_run()
    run.flush()
    transport.script = [400]
    with run.trace("refused"):
        pass
    assert run.flush()
    assert transport.events() == [] and run._sender.spool.pending() == []


def test_unreachable_server_spools_then_replays_in_order_with_the_same_keys(
        make_run, transport, tmp_path):
    transport.down = True
    run = make_run(max_retries=1, api_key="tlk_secretsecret")
    run._sender.backoff = 0.01
    _many(run, 3)
    run.log_metrics({"loss": 0.5}, step=0)
    assert run.flush(10) is False  # everything is on disk, nothing delivered
    files = run._sender.spool.pending()
    assert len(files) >= 3  # the run, events, metrics
    for path in files:
        assert b"tlk_secretsecret" not in open(path, "rb").read()
    spooled_keys = [json.loads(open(p, "rb").readline())["key"] for p in files]
    with run.trace("while down"):  # later data queues behind the spool
        pass
    run.flush(10)
    transport.down = False
    assert run.flush(10) is True
    assert run._sender.spool.pending() == []
    assert transport.sent[0]["method"] == "PUT"  # the run is created before its events
    sent_keys = [r["key"] for r in transport.sent]
    assert sent_keys[: len(spooled_keys)] == spooled_keys
    names = [e["name"] for e in transport.events() if e["op"] == "open"]
    assert names == ["rollout 0", "policy", "rollout 1", "policy", "rollout 2", "policy",
                     "while down"]
    assert len(transport.points()) == 1


def test_replaying_a_spool_twice_stores_nothing_twice(tmp_path):
    server = FakeServer()
    down = "http://127.0.0.1:%d" % server.port
    server.stop()  # the port is now closed
    spool = tmp_path / "spool"
    run = tl.init("p", url=down, spool_dir=str(spool), max_retries=0, finish_on_exit=False)
    _many(run, 5)
    run.log_metrics({"loss": 1.0}, step=0)
    run.flush(10)
    copy = tmp_path / "copy"
    shutil.copytree(spool, copy)
    server = FakeServer(port=server.port)
    try:
        assert run.flush(10) is True
        posts = lambda: [r for r in server.rec.requests if r[0] == "POST"]  # noqa: E731
        stored = len(posts())
        assert len(server.rec.events()) == 20 and len(server.rec.points()) == 1
        assert sync_main([str(copy)]) == 0  # the same files again, through the CLI
        assert len(posts()) == stored  # (the run's PUT is idempotent by itself)
        assert len(server.rec.events()) == 20 and len(server.rec.points()) == 1
        assert not glob.glob(str(copy / "*" / "*.tlspool"))
    finally:
        server.stop()


def test_sync_command_reports_what_is_left_when_still_down(tmp_path, capsys):
    spool = Spool(str(tmp_path / "r1"), url="http://127.0.0.1:9")
    from treeline.spool import Request
    spool.write(Request("POST", "/api/runs/r1/metrics", b"{}", None, "k1", "metrics"))
    assert sync_main([str(tmp_path), "--url", "http://127.0.0.1:9", "--timeout", "1"]) == 1
    assert "1 left" in capsys.readouterr().out
    assert len(spool.pending()) == 1


def test_full_queue_makes_new_spans_inert_but_still_closes_open_ones(make_run, transport):
    run = make_run(max_queue_bytes=20000, flush_interval=30, batch_bytes=1 << 30,
                   on_full="drop")
    open_span = run.trace("opened early")
    open_span.__enter__()
    spans = []
    for i in range(500):
        with run.trace("s%d" % i) as s:
            spans.append(s)
    run.log_metrics({"x": 1.0}, step=0)
    assert run.dropped > 0
    assert not spans[-1].is_recording and spans[0].is_recording
    open_span.__exit__(None, None, None)
    run.flush()
    closes = transport.closes()
    assert open_span.span_id in closes  # a recorded span is always closed
    assert set(transport.opens()) == set(closes)  # no orphans either way
    # memory stays bounded: what was queued fits the budget plus one span
    assert len(transport.events()) * 200 < 20000 * 2


def test_flush_is_a_barrier(make_run, transport):
    run = make_run(flush_interval=30)
    for i in range(50):
        run.log_metrics({"loss": float(i)}, step=i)
        with run.trace("t%d" % i):
            pass
        assert run.flush()
        assert len(transport.points()) == i + 1 and len(transport.events()) == 2 * (i + 1)


def _script(body):
    return textwrap.dedent("""
        import sys, time
        sys.path.insert(0, %r)
        from fakeserver import FakeServer
        import treeline as tl
        srv = FakeServer()
        import atexit, json
        def report():  # registered before treeline's handler, so it runs after it
            print("REPORT" + json.dumps([[m, p, b] for m, p, h, b in srv.rec.requests]))
        atexit.register(report)
    """ % HERE) + textwrap.dedent(body)


def _report(out):
    line = [l for l in out.splitlines() if l.startswith("REPORT")][0]
    return json.loads(line[len("REPORT"):])


def test_exit_closes_open_spans_as_interrupted_and_finishes_the_run(tmp_path):
    code = _script("""
        run = tl.init("p", url=srv.url, spool_dir=%r)
        root = run.trace("left open", kind="rollout")
        root.__enter__()
        root.span("child").start()
        raise RuntimeError("crash")
    """ % str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    requests = _report(out.stdout)
    events = [e for m, p, b in requests if p.endswith("/events") for e in b["events"]]
    closes = [e["status"] for e in events if e["op"] == "close"]
    assert closes == ["interrupted", "interrupted"]
    finish = [b for m, p, b in requests if p.endswith("/finish")]
    assert finish and finish[0]["status"] == "failed"


def test_a_clean_exit_finishes_the_run_and_a_joined_run_is_left_alone(tmp_path):
    code = _script("""
        run = tl.init("p", url=srv.url, spool_dir=%r)
        joined = tl.init("p", url=srv.url, spool_dir=%r, run_id="owned-elsewhere")
        with joined.trace("worker side"):
            pass
    """ % (str(tmp_path), str(tmp_path)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    requests = _report(out.stdout)
    finishes = [(p, b["status"]) for m, p, b in requests if p.endswith("/finish")]
    assert len(finishes) == 1 and finishes[0][1] == "finished"
    assert "owned-elsewhere" not in finishes[0][0]
    assert any("owned-elsewhere/traces/events" in p for m, p, b in requests)


def test_forked_workers_send_their_spans_and_leave_the_parents_alone(tmp_path):
    code = _script("""
        import multiprocessing as mp
        run = tl.init("p", url=srv.url, spool_dir=%r)

        def work(i):
            with tl.span("worker %%d" %% i, kind="preprocessing"):
                pass

        with run.trace("parent", kind="rollout") as root:
            ctx = mp.get_context("fork")
            procs = [ctx.Process(target=work, args=(i,)) for i in range(2)]
            for p in procs: p.start()
            for p in procs: p.join()
        run.finish()
        print("PARENT", root.span_id)
    """ % str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    parent_id = [l.split()[1] for l in out.stdout.splitlines() if l.startswith("PARENT")][0]
    requests = _report(out.stdout)
    events = [e for m, p, b in requests if p.endswith("/events") for e in b["events"]]
    workers = [e for e in events if e["op"] == "open" and e["name"].startswith("worker")]
    assert len(workers) == 2 and all(e["parent_span_id"] == parent_id for e in workers)
    parent_closes = [e for e in events if e["op"] == "close" and e["span_id"] == parent_id]
    assert [e["status"] for e in parent_closes] == ["ok"]  # once, by the parent
    assert len([b for m, p, b in requests if p.endswith("/finish")]) == 1


def test_compression_prefers_zstd_and_falls_back_to_gzip(monkeypatch):
    from treeline import transport as tr

    monkeypatch.setattr(tr, "_zstd", None)
    assert tr.pick_encoding("auto") == "gzip"
    body, enc = tr.encode({"events": ["x" * 5000]}, "gzip")
    assert enc == "gzip" and len(body) < 1000
    small, enc = tr.encode({"events": []}, "gzip")
    assert enc is None  # not worth compressing
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return
    monkeypatch.undo()
    assert tr.pick_encoding("auto") == "zstd"


def test_run_as_a_context_manager_finishes_it(make_run, transport):
    try:
        with make_run() as run:
            with run.trace("t"):
                raise RuntimeError("x")
    except RuntimeError:
        pass
    finish = [r for r in transport.sent if r["path"].endswith("/finish")]
    assert finish[0]["body"]["status"] == "failed" and finish[0]["key"]
    with make_run() as run:
        pass
    finish = [r for r in transport.sent if r["path"].endswith("/finish")]
    assert finish[-1]["body"]["status"] == "finished"


# -- faults of the sender, and refused keys ---------------------------------------------

def _fault(transport, err):
    """Makes `transport.send` raise `err` (not a network error) until the returned
    function is called."""
    real = transport.send

    def send(*args, **kwargs):
        transport.attempts.append(args[:2])
        raise err

    transport.send = send
    return lambda: setattr(transport, "send", real)


def test_a_fault_in_the_sender_spools_the_data_and_says_why_once(make_run, transport, caplog):
    # The error a scheme-less URL used to cause on the sender thread.
    repair = _fault(transport, TypeError("'NoneType' object does not support the context "
                                         "manager protocol"))
    run = make_run()
    _many(run, 3)
    run.log_metrics({"loss": 0.5}, step=0)
    start = time.monotonic()
    assert run.flush(20) is False  # kept on disk, not delivered ...
    assert time.monotonic() - start < 5  # ... and flush did not wait out its timeout
    assert len(run._sender.spool.pending()) >= 3  # the run, its events, its metrics
    said = [r for r in caplog.records if "TypeError" in r.getMessage()]
    assert len(said) == 1 and "kept in" in said[0].getMessage()
    repair()
    assert run.flush(10) is True
    assert transport.sent[0]["method"] == "PUT"
    assert len(transport.events()) == 12 and len(transport.points()) == 1
    assert run.counters()["sender_dropped"] == 0


def test_a_fault_in_the_drain_loop_keeps_what_it_held(make_run, transport):
    run = make_run(flush_interval=30)
    run.flush()
    sender = run._sender
    real = sender._post_events
    sender._post_events = lambda events, per_item: (_ for _ in ()).throw(RuntimeError("bug"))
    _many(run, 2)
    run.log_metrics({"loss": 0.5}, step=0)
    start = time.monotonic()
    assert run.flush(10) is False
    assert time.monotonic() - start < 5
    sender._post_events = real
    assert run.flush(10) is True
    assert len(transport.events()) == 8 and len(transport.points()) == 1


def test_what_the_sender_cannot_even_spool_is_counted(make_run, transport):
    run = make_run()
    run.flush()
    sender = run._sender
    real = sender._encode
    sender._encode = lambda field, items: (
        (_ for _ in ()).throw(RuntimeError("bug")) if field == "events" else real(field, items))
    _many(run, 2)
    run.log_metrics({"loss": 0.5}, step=0)
    run.flush(10)
    assert run.counters()["sender_dropped"] == 8  # 2 traces, 2 spans each, open and close
    assert len(transport.points()) == 1


class Refusing(MemoryTransport):
    """A server that refuses the key, with the message the real server gives."""

    def __init__(self, status, message, api_key=None):
        super().__init__()
        self.status, self.message, self.api_key = status, message, api_key

    def send(self, method, path, body, content_encoding=None, idempotency_key=None):
        self.attempts.append((method, path, idempotency_key))
        code = "unauthorized" if self.status == 401 else "forbidden"
        return self.status, {"error": {"code": code, "message": self.message}}


@pytest.mark.parametrize("status, message, key, advice", [
    (403, "this key may only read; writing needs a write key", "tl_readkey1",
     "This key may not write here"),
    (401, "the API key is not valid", "tl_wrongkey", "the server does not know this key"),
    (401, "this server needs credentials", None, "The server needs a key"),
])
def test_a_refused_key_is_said_once_counted_kept_and_not_retried(
        tmp_path, caplog, status, message, key, advice):
    transport = Refusing(status, message, key)
    run = tl.init("p", transport=transport, api_key=key, spool_dir=str(tmp_path / "spool"),
                  flush_interval=0.05, finish_on_exit=False)
    _many(run, 3)
    run.log_metrics({"loss": 0.5}, step=0)
    start = time.monotonic()
    assert run.flush(20) is False
    assert time.monotonic() - start < 5  # a refusal is not waited out like a network error
    assert len(transport.attempts) == 1  # the run's PUT, once: no retries, nothing more sent
    assert run.counters()["refused_requests"] == 1
    said = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.ERROR
    text = said[0].getMessage()
    assert message in text and advice in text and "TREELINE_API_KEY" in text
    assert "treeline-sync " + run.spool_dir in text
    assert not [r for r in caplog.records if "unreachable" in r.getMessage()]
    with run.trace("later"):  # later batches go straight to the spool
        pass
    assert run.flush(20) is False and len(transport.attempts) == 1
    # Kept, so a new key sends it.
    server = FakeServer()
    try:
        assert sync_main([run.spool_dir, "--url", server.url, "--api-key", "tl_new"]) == 0
        assert len(server.rec.events()) == 14 and len(server.rec.points()) == 1
    finally:
        server.stop()


def test_sync_says_a_new_key_is_needed_when_the_server_refuses_it(tmp_path, capsys):
    from treeline.spool import Request
    spool = Spool(str(tmp_path / "r1"))
    spool.write(Request("POST", "/api/runs/r1/metrics", b'{"points": []}', None, "k1",
                        "metrics"))
    server = FakeServer()
    server.rec.fail_next = [401]
    try:
        assert sync_main([str(tmp_path), "--url", server.url, "--api-key", "tl_old"]) == 1
    finally:
        server.stop()
    out = capsys.readouterr().out
    assert "refused the key: HTTP 401" in out and "A new key is needed" in out
    assert "--api-key" in out and "TREELINE_API_KEY" in out
    assert len(spool.pending()) == 1  # left in place for the new key
    assert not glob.glob(str(tmp_path / "r1" / "*.rejected"))
