"""Starts the real `treeline serve` named by $TREELINE_BIN for the OTLP tests; fails
(never skips) without it."""

import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request

import pytest
from treeline.testing import LocalServer, ServerStartError


class Server(LocalServer):
    def __init__(self):
        path = os.environ.get("TREELINE_BIN")
        if not path:
            pytest.fail("TREELINE_BIN is not set: it must name the `treeline` executable")
        if not os.path.exists(path):
            pytest.fail("TREELINE_BIN=%s does not exist" % path)
        # One directory to remove afterwards: the server's data and its log.
        self.root = tempfile.mkdtemp(prefix="treeline-otlp-")
        args = []
        # scripts/test-otlp.sh runs the suite a second time on PostgreSQL.
        database_url = os.environ.get("TREELINE_TEST_DATABASE_URL")
        if database_url:
            args += ["--database-url", database_url]
        super().__init__(path, data_dir=os.path.join(self.root, "data"), args=args,
                         log=os.path.join(self.root, "server.log"))

    def start(self, timeout=20.0):
        try:
            return super().start(timeout)
        except ServerStartError as err:
            failure = str(err)
        pytest.fail(failure)  # outside the except, so the report is the log, not a chain

    def get(self, path):
        """GET a query endpoint and return its JSON; fails the test on an error."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:
            pytest.fail("GET %s: %s %s" % (path, err.code, err.read()[:500]))


@pytest.fixture(scope="session")
def server():
    proc = Server().start()
    yield proc
    proc.stop()
    shutil.rmtree(proc.root, ignore_errors=True)
