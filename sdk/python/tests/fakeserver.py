"""A stand-in HTTP server that records what the SDK sends (for tests that need no real
Treeline server: batching, retries, spooling, exit behaviour)."""

import gzip
import http.server
import json
import socket
import threading

def zstd_decompress(data):
    """zstd as the SDK may send it: from Python 3.14's compression.zstd, else from the
    zstandard package."""
    try:
        from compression import zstd
    except ImportError:
        import zstandard
        return zstandard.ZstdDecompressor().decompress(data)
    return zstd.decompress(data)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_in_thread(handler):
    """Serves `handler` (a BaseHTTPRequestHandler class) on a free loopback port from a
    daemon thread; returns the server (shut it down with `stop_serving`) and its URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    return httpd, "http://127.0.0.1:%d" % httpd.server_address[1]


def stop_serving(httpd):
    httpd.shutdown()
    httpd.server_close()


class Recorder:
    def __init__(self):
        self.requests = []  # (method, path, headers, body)
        self.lock = threading.Lock()
        self.fail_next = []  # statuses to answer before succeeding
        self.seen_keys = {}

    def events(self):
        return [e for m, p, h, b in self.requests if p.endswith("/traces/events")
                for e in b["events"]]

    def points(self):
        return [pt for m, p, h, b in self.requests if p.endswith("/metrics") for pt in b["points"]]

    def paths(self):
        return [(m, p) for m, p, h, b in self.requests]


class FakeServer:
    def __init__(self, port=None):
        self.port = port or free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.rec = Recorder()
        rec = self.rec

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _body(self):
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                enc = self.headers.get("Content-Encoding")
                if enc == "gzip":
                    data = gzip.decompress(data)
                elif enc == "zstd":
                    data = zstd_decompress(data)
                return json.loads(data) if data else None

            def _answer(self, status, obj, extra=()):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in extra:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _handle(self):
                body = self._body()
                with rec.lock:
                    if rec.fail_next:
                        status = rec.fail_next.pop(0)
                        rec.requests.append(("FAILED-" + self.command, self.path,
                                             dict(self.headers), body))
                        return self._answer(status, {"error": {"code": "busy", "message": "x"}})
                    key = self.headers.get("Idempotency-Key")
                    if key and key in rec.seen_keys:
                        return self._answer(200, rec.seen_keys[key],
                                            [("Idempotent-Replayed", "true")])
                    rec.requests.append((self.command, self.path, dict(self.headers), body))
                    n = len((body or {}).get("events") or (body or {}).get("points") or [])
                    answer = {"accepted": n, "rejected": [], "warnings": []}
                    if key:
                        rec.seen_keys[key] = answer
                self._answer(201 if self.command == "PUT" else 200, answer)

            do_PUT = do_POST = _handle

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
