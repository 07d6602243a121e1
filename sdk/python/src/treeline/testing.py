"""Start a local Treeline server for tests: `treeline serve` on a free loopback port with
a data directory of its own, waited for until it answers /healthz, and stopped.

    from treeline.testing import LocalServer

    server = LocalServer("target/debug/treeline").start()  # ServerStartError if not
    run = tl.init("test", url=server.url)
    ...
    server.stop()

The SDK's tests, the OTLP tests and benchmarks/delivery.py start their servers with it.
`import treeline` does not import it."""

import os
import socket
import subprocess
import tempfile
import time
import urllib.request

from .errors import TreelineError

# How much of the log a failure quotes: the end is where the server says why.
TAIL_BYTES = 3000


class ServerStartError(TreelineError, RuntimeError):
    """`treeline serve` exited, or did not answer /healthz in time; the message names
    the log and ends with its tail."""


def free_port():
    """A TCP port free on 127.0.0.1 (until something else takes it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """`binary serve` on 127.0.0.1:`port` (default: a free one) with `data_dir` (default:
    a new temporary directory, which the caller removes) and `args`, more `serve` flags
    such as ["--database-url", url]. Its output goes to the file `log` (default: a new
    temporary file), opened for appending, so a server stopped and started again keeps
    one log."""

    def __init__(self, binary, data_dir=None, port=None, args=(), log=None):
        self.binary = binary
        self.port = port or free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="treeline-data-")
        self.args = list(args)
        if log is None:
            fd, log = tempfile.mkstemp(prefix="treeline-server-", suffix=".log")
            os.close(fd)
        self.log = log
        self.proc = None
        self._log_file = None

    def start(self, timeout=20.0):
        """Starts the server and returns self once /healthz answers 200. Raises
        ServerStartError (the server stopped) if the process exits first or `timeout`
        seconds pass."""
        self._log_file = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--addr", "127.0.0.1:%d" % self.port,
             "--data-dir", self.data_dir] + self.args,
            stdout=self._log_file, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                raise ServerStartError("treeline serve exited with %s; log: %s\n%s"
                                       % (self.proc.returncode, self.log, self.tail()))
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as resp:
                    if resp.status == 200:
                        return self
            except OSError:  # not listening yet (urllib's errors are OSErrors)
                pass
            time.sleep(0.1)
        self.stop()
        raise ServerStartError("treeline serve did not answer /healthz within %.0f s; "
                               "log: %s\n%s" % (timeout, self.log, self.tail()))

    def stop(self):
        """Stops the server (SIGTERM, SIGKILL after 10 s); `start` may run it again."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def tail(self, size=TAIL_BYTES):
        """The last `size` bytes of the log, as text."""
        with open(self.log, "rb") as f:
            return f.read()[-size:].decode("utf-8", "replace")
