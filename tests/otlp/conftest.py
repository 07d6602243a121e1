"""Starts the real `treeline serve` named by $TREELINE_BIN for the OTLP tests; fails
(never skips) without it."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(self):
        path = os.environ.get("TREELINE_BIN")
        if not path:
            pytest.fail("TREELINE_BIN is not set: it must name the `treeline` executable")
        if not os.path.exists(path):
            pytest.fail("TREELINE_BIN=%s does not exist" % path)
        self.port = _free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.data_dir = tempfile.mkdtemp(prefix="treeline-otlp-")
        self.log = open(os.path.join(self.data_dir, "server.log"), "wb")
        args = [path, "serve", "--addr", "127.0.0.1:%d" % self.port,
                "--data-dir", os.path.join(self.data_dir, "data")]
        # scripts/test-otlp.sh runs the suite a second time on PostgreSQL.
        database_url = os.environ.get("TREELINE_TEST_DATABASE_URL")
        if database_url:
            args += ["--database-url", database_url]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail("treeline serve exited with %s:\n%s"
                            % (self.proc.returncode, self.tail()))
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        pytest.fail("treeline serve did not answer /healthz in %.0f s:\n%s"
                    % (timeout, self.tail()))

    def tail(self):
        self.log.flush()
        with open(self.log.name, "rb") as f:
            return f.read()[-3000:].decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def get(self, path):
        """GET a query endpoint and return its JSON; fails the test on an error."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:
            pytest.fail("GET %s: %s %s" % (path, err.code, err.read()[:500]))


@pytest.fixture(scope="session")
def server():
    proc = Server().wait_ready()
    yield proc
    proc.stop()
    shutil.rmtree(proc.data_dir, ignore_errors=True)
