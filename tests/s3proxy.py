"""A counting HTTP proxy in front of the S3 server of the tests: every request a reader makes,
and every byte the server sends back, counted where they cross the wire. It can also inject
faults (:class:`Fault`): S3 refusing a chosen request, or something happening on the server
just before a chosen request reaches it."""

from __future__ import annotations

import http.client
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Fault:
    """What the proxy does to the requests of ``method`` on a path that holds ``key``, from
    the ``first``-th of them on (counted from 1), to ``times`` of them (None: all): call
    ``before`` and then forward the request (another client acting on the server between two
    requests), or else answer S3's error ``code`` with HTTP ``status`` in place of the server."""

    method: str
    key: str
    first: int = 1
    times: int | None = None
    status: int = 403
    code: str = "AccessDenied"
    before: Callable[[], None] | None = None
    seen: int = 0  # the matching requests so far
    done: int = 0  # ... and those it acted on

    def error(self) -> bytes:
        return (
            f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{self.code}</Code><Message>'
            "injected by the test proxy</Message></Error>"
        ).encode()


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
        self.faults: list[Fault] = []
        self._faults_lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # A reply's headers and body go out as two writes: without this, each reply waits
            # 40 ms for the client's delayed ACK (Nagle's algorithm).
            disable_nagle_algorithm = True

            def _forward(self) -> None:
                body = self._body()
                fault = proxy._fault(self.command, self.path)
                if fault is not None and fault.before is None:
                    self._refuse(fault)
                    return
                if fault is not None:
                    fault.before()
                upstream = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                upstream.putrequest(self.command, self.path, skip_host=True)
                for key, value in self.headers.items():
                    if key.lower() not in ("connection", "expect"):
                        upstream.putheader(key, value)
                upstream.endheaders()
                upstream.send(body)
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

            def _refuse(self, fault: Fault) -> None:
                data = fault.error()
                counts.add(len(data), "Range" in self.headers, self.command, self.path)
                self.send_response_only(fault.status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(data)))
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

    def inject(self, fault: Fault) -> Fault:
        """Act on the requests ``fault`` matches from now on."""
        with self._faults_lock:
            self.faults.append(fault)
        return fault

    def _fault(self, method: str, path: str) -> Fault | None:
        """The fault that acts on this request, its count taken, if any."""
        with self._faults_lock:
            for fault in self.faults:
                if fault.method == method and fault.key in path.split("?")[0]:
                    fault.seen += 1
                    if fault.seen >= fault.first and fault.done != fault.times:
                        fault.done += 1
                        return fault
        return None

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
