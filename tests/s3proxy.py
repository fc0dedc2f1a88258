"""A counting HTTP proxy in front of the S3 server of the tests: every request a reader makes,
and every byte the server sends back, counted where they cross the wire."""

from __future__ import annotations

import http.client
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Counts:
    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0  # response bodies
        self.ranged = 0  # GETs with a Range header
        self.seen: list[tuple[str, str]] = []  # (method, path and query) of each request
        self._lock = threading.Lock()

    def add(self, body: int, ranged: bool, method: str = "", path: str = "") -> None:
        with self._lock:
            self.requests += 1
            self.bytes += body
            self.ranged += ranged
            self.seen.append((method, path))

    def take(self) -> tuple[int, int]:
        """(requests, bytes) since the last take."""
        with self._lock:
            out = (self.requests, self.bytes)
            self.requests = self.bytes = self.ranged = 0
        return out


class CountingProxy:
    """Forwards to ``127.0.0.1:port`` from a port of its own (``self.port``)."""

    @classmethod
    def in_front_of(cls, uri: str) -> CountingProxy:
        """A proxy for the server of ``uri``, an ``s3://...?endpoint_override=127.0.0.1:PORT``
        URI; :meth:`through` gives that server's URIs through it."""
        return cls(int(re.search(r"endpoint_override=127\.0\.0\.1:(\d+)", uri).group(1)))

    def through(self, uri: str) -> str:
        """``uri`` (of the server behind this proxy) read through this proxy."""
        return uri.replace(f"127.0.0.1:{self.upstream}", f"127.0.0.1:{self.port}")

    def __init__(self, port: int):
        self.upstream = port
        counts = self.counts = Counts()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                upstream = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                upstream.putrequest(self.command, self.path, skip_host=True)
                for key, value in self.headers.items():
                    if key.lower() not in ("connection", "expect"):
                        upstream.putheader(key, value)
                upstream.endheaders()
                upstream.send(self._body())
                response = upstream.getresponse()
                data = response.read()
                upstream.close()
                counts.add(len(data), "Range" in self.headers, self.command, self.path)
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

            def _body(self) -> bytes:
                """The request's body as it came: by length, or chunked (S3 uploads: chunks,
                then trailers), passed on unchanged."""
                length = self.headers.get("Content-Length")
                if "chunked" not in self.headers.get("Transfer-Encoding", ""):
                    return self.rfile.read(int(length)) if length else b""
                raw = b""
                while True:
                    line = self.rfile.readline()
                    raw += line
                    size = int(line.split(b";")[0], 16)
                    if size == 0:
                        break
                    raw += self.rfile.read(size + 2)
                while True:  # trailers, then an empty line
                    line = self.rfile.readline()
                    raw += line
                    if line in (b"\r\n", b"\n", b""):
                        return raw

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
