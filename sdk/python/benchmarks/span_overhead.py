"""Prints the per-span overhead of `with run.trace(...)` (capture off, the default).

The server is replaced by an in-process stand-in that answers at once, so the figure
is the SDK's own cost: the training loop's share (building and queueing an open and a
close) plus, in the second figure, the background sender's encoding and compression
competing for the same interpreter.

    python sdk/python/benchmarks/span_overhead.py [N]
"""

import statistics
import sys
import tempfile
import time

import treeline as tl


class NullTransport:
    url = "null://"

    def send(self, method, path, body, content_encoding=None, idempotency_key=None):
        return 200, {"accepted": 0, "rejected": [], "warnings": []}


def loop_empty(n):
    t = time.perf_counter()
    for i in range(n):
        pass
    return time.perf_counter() - t


def loop_traced(run, n):
    t = time.perf_counter()
    for i in range(n):
        with run.trace("rollout", kind="rollout", step=i):
            pass
    return time.perf_counter() - t


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    run = tl.init("bench", transport=NullTransport(), spool_dir=tempfile.mkdtemp(),
                  flush_interval=0.2)
    loop_traced(run, 2000)  # warm up
    run.flush()
    hot = []
    for _ in range(7):
        base = loop_empty(n)
        hot.append((loop_traced(run, n) - base) / n * 1e6)
        run.flush()
    t = time.perf_counter()
    loop_traced(run, n)
    run.flush()
    total = (time.perf_counter() - t) / n * 1e6
    run.finish()
    print("per-span overhead of `with run.trace(...)`, capture off: %.2f us "
          "(median of 7 x %d spans; min %.2f, max %.2f)"
          % (statistics.median(hot), n, min(hot), max(hot)))
    print("including the background sender's JSON + compression until flushed: %.2f us/span"
          % total)
    print("target: <= 20 us")


if __name__ == "__main__":
    main()
