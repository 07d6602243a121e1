"""Fixtures. Unit tests use an in-memory transport; tests marked `server` start the
real `treeline serve` named by $TREELINE_BIN and fail (never skip) without it."""

import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest

# Test this checkout's SDK, installed or not, here and in the subprocesses tests start.
_SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
sys.path.insert(0, _SRC)
sys.path.insert(0, os.path.dirname(__file__))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_SRC] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

import treeline as tl  # noqa: E402
from treeline.transport import Unreachable  # noqa: E402
from treeline.testing import LocalServer, ServerStartError  # noqa: E402
from fakeserver import zstd_decompress  # noqa: E402


class MemoryTransport:
    """Records decoded requests; `script` holds outcomes to play before succeeding:
    an int is an HTTP status, "down" raises Unreachable."""

    def __init__(self):
        self.url = "memory://"
        self.sent = []  # dicts: method, path, body, key, encoding
        self.attempts = []
        self.script = []
        self.down = False
        self.retry_after = None
        self.lock = threading.Lock()
        self._answers = {}

    def send(self, method, path, body, content_encoding=None, idempotency_key=None):
        with self.lock:
            self.attempts.append((method, path, idempotency_key))
            self.retry_after = None
            if self.down:
                raise Unreachable("down")
            if self.script:
                outcome = self.script.pop(0)
                if outcome == "down":
                    raise Unreachable("down")
                if isinstance(outcome, tuple):  # (status, Retry-After seconds)
                    outcome, self.retry_after = outcome
                return outcome, {"error": {"code": "test", "message": "scripted"}}
            if idempotency_key in self._answers:
                return 200, self._answers[idempotency_key]
            raw = body
            if content_encoding == "gzip":
                raw = gzip.decompress(body)
            elif content_encoding == "zstd":
                raw = zstd_decompress(body)
            obj = json.loads(raw)
            self.sent.append({"method": method, "path": path, "body": obj,
                              "key": idempotency_key, "encoding": content_encoding})
            answer = {"accepted": len(obj.get("events") or obj.get("points") or []),
                      "rejected": [], "warnings": []}
            if idempotency_key:
                self._answers[idempotency_key] = answer
            return 200, answer

    def events(self):
        return [e for r in self.sent if r["path"].endswith("/traces/events")
                for e in r["body"]["events"]]

    def points(self):
        return [p for r in self.sent if r["path"].endswith("/metrics") for p in r["body"]["points"]]

    def opens(self):
        return {e["span_id"]: e for e in self.events() if e["op"] == "open"}

    def closes(self):
        return {e["span_id"]: e for e in self.events() if e["op"] == "close"}


@pytest.fixture
def transport():
    return MemoryTransport()


@pytest.fixture
def make_run(transport, tmp_path):
    runs = []

    def make(**options):
        options.setdefault("transport", transport)
        options.setdefault("spool_dir", str(tmp_path / "spool"))
        options.setdefault("flush_interval", 0.05)
        options.setdefault("finish_on_exit", False)
        run = tl.init(options.pop("project", "unit"), **options)
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.flush(5)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("TREELINE_DISABLED", "TREELINE_SAMPLE_RATE", "TREELINE_URL",
                 "TREELINE_API_KEY", "RANK"):
        monkeypatch.delenv(name, raising=False)


# -- the real server -----------------------------------------------------------------

def _binary():
    path = os.environ.get("TREELINE_BIN")
    if not path:
        pytest.fail("TREELINE_BIN is not set: server tests need the path of the `treeline` "
                    "executable (build the server, then export TREELINE_BIN=.../treeline)")
    if not os.path.exists(path):
        pytest.fail("TREELINE_BIN=%s does not exist" % path)
    return path


def create_key(data_dir, scope, project=None):
    """A key made by `treeline keys create` in `data_dir` (a server running there sees
    it at once; --init makes the database when the server has not started there)."""
    args = [_binary(), "keys", "create", "--init", "--scope", scope, "--data-dir", str(data_dir)]
    if project is not None:
        args += ["--project", project]
    made = subprocess.run(args, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip().splitlines()[-1]


class ServerProcess(LocalServer):
    """`treeline serve` for one test or the session; a failed start fails the test."""

    def __init__(self, port=None, data_dir=None, args=()):
        # args: more `serve` flags, e.g. ["--api-key-file", path]
        super().__init__(_binary(), data_dir=data_dir, port=port, args=args)

    def start(self, timeout=20.0):
        try:
            return super().start(timeout)
        except ServerStartError as err:
            failure = str(err)
        pytest.fail(failure)  # outside the except, so the report is the log, not a chain

    def get(self, path):
        """GET a query endpoint; returns (status, JSON)."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"null")


@pytest.fixture(scope="session")
def server():
    proc = ServerProcess().start()
    yield proc
    proc.stop()
    shutil.rmtree(proc.data_dir, ignore_errors=True)


@pytest.fixture
def server_factory():
    started = []

    def make(port=None, data_dir=None, args=()):
        proc = ServerProcess(port, data_dir, args)
        started.append(proc)
        return proc

    yield make
    for proc in started:
        proc.stop()
