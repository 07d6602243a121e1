"""Prints how many span events per second the SDK delivers to a real server, from the
first span made until `flush()` returns (so the figure includes making the spans,
encoding, compressing and the HTTP round trips, all in this one Python process).

Each trace is a root and 49 children (50 spans, 100 events); it runs once with
capture off and once with capture="preview" (small inputs and outputs on every span).

    python sdk/python/benchmarks/delivery.py [--url URL | --bin PATH] [--traces N]
        [--capture off|preview|both] [--compression auto|zstd|gzip|none] [--profile]

It also prints the CPU time this process spent per event (the training loop's share
and the sender's), which says what the SDK could deliver with a server that keeps up:
on a busy machine the server is often the slower side.

Without --url, it starts `PATH serve` (--bin, else $TREELINE_BIN) on a free port with
a temporary data directory, and stops it at the end. With --profile, it prints where
the time went (cProfile, sorted by own time) after each run.
"""

import argparse
import cProfile
import json
import os
import pstats
import shutil
import sys
import tempfile
import time
import urllib.request

import treeline as tl
from treeline.testing import LocalServer, ServerStartError

SPANS_PER_TRACE = 50


def start_server(binary):
    """`binary serve` on a temporary data directory, which holds its log too (main
    removes it at the end); exits with the log's tail if it does not start."""
    data = tempfile.mkdtemp(prefix="treeline-bench-")
    server = LocalServer(binary, data_dir=data, log=os.path.join(data, "server.log"))
    try:
        return server.start(timeout=30)
    except ServerStartError as err:
        sys.exit("the server did not start: %s" % err)


def server_cpu(proc):
    """The server's CPU seconds so far (Linux' /proc), or None where that cannot be read."""
    if proc is None:
        return None
    try:
        with open("/proc/%d/stat" % proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def workload(run, traces, capture):
    preview = capture == "preview"
    for i in range(traces):
        with run.trace("rollout", kind="rollout", step=i, capture=capture,
                       inputs={"episode": i} if preview else None) as root:
            for j in range(SPANS_PER_TRACE - 1):
                with root.span("env.step", kind="env_step",
                               inputs={"obs": [0.1, 0.2, 0.3, j]} if preview else None) as s:
                    if preview:
                        s.set_output({"action": j & 1, "p": 0.5})


def measure(url, traces, capture, profile, compression="auto", proc=None, max_inflight=4):
    spool = tempfile.mkdtemp(prefix="treeline-bench-spool-")
    run = tl.init("bench", name="delivery %s" % capture, url=url, spool_dir=spool,
                  finish_on_exit=False, compression=compression,
                  max_inflight=max_inflight)
    workload(run, 20, capture)  # warm up: connection, imports, the run's PUT
    run.flush()
    prof = cProfile.Profile() if profile else None
    if prof:
        prof.enable()
    cpu = time.process_time()
    served = server_cpu(proc)
    t = time.perf_counter()
    workload(run, traces, capture)
    made = time.perf_counter() - t
    assert run.flush(600), "not everything was delivered"
    total = time.perf_counter() - t
    cpu = time.process_time() - cpu
    if served is not None:
        served = server_cpu(proc) - served
    if prof:
        prof.disable()
    counters = run.counters()
    run.finish()
    with urllib.request.urlopen("%s/api/runs/%s" % (url, run.run_id)) as resp:
        stored = json.load(resp)["trace_count"]
    assert stored == traces + 20, "the server holds %d traces, not %d" % (stored, traces + 20)
    shutil.rmtree(spool, ignore_errors=True)
    events = traces * SPANS_PER_TRACE * 2
    print("capture=%-7s %8d events in %.2f s: %7.0f events/s delivered until flushed "
          "(spans made at %.0f spans/s; this process used %.1f us of CPU per event, "
          "all threads: %.0f events/s if the server kept up)%s"
          % (capture, events, total, events / total, events / 2 / made, cpu / events * 1e6,
             events / cpu, "" if not counters.get("dropped_spans") else
             "; DROPPED %d spans" % counters["dropped_spans"]))
    if served is not None:
        print("%18s the server used %.1f us of CPU per event" % ("", served / events * 1e6))
    if prof:
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(18)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", help="a running server (default: start one)")
    parser.add_argument("--bin", default=os.environ.get("TREELINE_BIN"),
                        help="the treeline executable to start (default: $TREELINE_BIN)")
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--capture", choices=("off", "preview", "both"), default="both")
    parser.add_argument("--compression", default="auto",
                        choices=("auto", "zstd", "gzip", "none"))
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--max-inflight", type=int, default=4,
                        help="span-event requests in flight (the SDK's default: 4)")
    args = parser.parse_args()
    server = None
    url = args.url
    if url is None:
        if not args.bin:
            sys.exit("give --url of a running server, or --bin (or $TREELINE_BIN) to start one")
        server = start_server(args.bin)
        url = server.url
    proc = server.proc if server else None
    try:
        print("compression: %s" % (tl.compression() if args.compression == "auto"
                                   else args.compression))
        for capture in (("off", "preview") if args.capture == "both" else (args.capture,)):
            measure(url, args.traces, capture, args.profile, args.compression, proc,
                    args.max_inflight)
    finally:
        if server is not None:
            server.stop()
            shutil.rmtree(server.data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
