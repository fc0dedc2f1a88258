"""A counting HTTP proxy in front of the S3 server of the tests: every request a reader makes,
and every byte the server sends back, counted where they cross the wire."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Counts:
    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0  # response bodies
        self.ranged = 0  # GETs with a Range header
        self._lock = threading.Lock()

    def add(self, body: int, ranged: bool) -> None:
        with self._lock:
            self.requests += 1
            self.bytes += body
            self.ranged += ranged

    def take(self) -> tuple[int, int]:
        """(requests, bytes) since the last take."""
        with self._lock:
            out = (self.requests, self.bytes)
            self.requests = self.bytes = self.ranged = 0
        return out


class CountingProxy:
    """Forwards to ``127.0.0.1:port`` from a port of its own (``self.port``)."""

    def __init__(self, port: int):
        counts = self.counts = Counts()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                upstream = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
                data = response.read()
                upstream.close()
                counts.add(len(data), "Range" in self.headers)
                self.send_response_only(response.status, response.reason)
                skipped = ("connection", "transfer-encoding")
                if self.command != "HEAD":  # a HEAD's length is the object's: kept
                    skipped += ("content-length",)
                    self.send_header("Content-Length", str(len(data)))
                for key, value in response.getheaders():
                    if key.lower() not in skipped:
                        self.send_header(key, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
