"""The read-only HTTP endpoint: ``GET /metrics`` (Prometheus) and, when a renderer for
``("draw", "html")`` is registered, ``GET /`` (the host's topology as a page).

Anything else is 404; methods other than GET and HEAD are 405.  Built on the standard
library's ``ThreadingHTTPServer`` (one thread per connection, HTTP/1.0: one request each),
hardened for a port anybody on the host can reach:

* a deadline for the whole request (:data:`REQUEST_DEADLINE`, not per read: a client sending
  a header line every few seconds is dropped all the same), then a socket timeout for the
  answer, so a slow or silent client is dropped, not waited for;
* at most :data:`MAX_CONNECTIONS` at once; when full, the connection that has waited longest
  without sending its whole request is closed to make room, so a scrape is answered however
  many idle or slow clients hold connections;
* malformed requests get the standard library's 400 and the server carries on; an error in a
  handler is logged as one event, never a traceback on stderr.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

__all__ = ["MAX_CONNECTIONS", "App", "MetricsServer", "start"]

MAX_CONNECTIONS = 32
#: Seconds a client may take to read the answer.
CLIENT_TIMEOUT = 10.0
#: Seconds a client has to send its whole request (request line and headers), however it trickles.
REQUEST_DEADLINE = 5.0
#: Connections the kernel queues before the server accepts them (socketserver's default is 5).
LISTEN_BACKLOG = 256


class _DeadlineReader:
    """The connection's input with one deadline for all reads: each read's socket timeout is
    the time left, so the whole request must arrive by the deadline."""

    def __init__(self, raw: Any, sock: socket.socket, deadline: float) -> None:
        self._raw, self._sock, self._deadline = raw, sock, deadline

    def _arm(self) -> None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request deadline passed")
        self._sock.settimeout(left)

    def readline(self, size: int = -1) -> bytes:
        self._arm()
        return bytes(self._raw.readline(size))

    def read(self, size: int = -1) -> bytes:
        self._arm()
        return bytes(self._raw.read(size))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class App(Protocol):
    """What the server serves: the daemon answers these."""

    def metrics(self, accept: str | None) -> tuple[bytes, str]:
        """The metrics in the format the ``Accept`` header asks for: the body and its content type."""

    def html(self) -> str | None:
        """The status page served at ``/``, or None when there is none yet."""


class _Handler(BaseHTTPRequestHandler):
    server: MetricsServer
    server_version = "topoagent"
    sys_version = ""
    protocol_version = "HTTP/1.0"
    # Answer a request line that cannot be parsed with a status line too (the standard
    # library's default, HTTP/0.9, sends a bare body).
    default_request_version = "HTTP/1.0"
    timeout = CLIENT_TIMEOUT  # applied to the connection's socket by StreamRequestHandler.setup

    def setup(self) -> None:
        super().setup()
        self.rfile = _DeadlineReader(self.rfile, self.connection, time.monotonic() + REQUEST_DEADLINE)  # type: ignore[assignment]

    def parse_request(self) -> bool:
        ok = super().parse_request()  # the request line and headers are in: the deadline is met
        self.server.answering(self.connection)
        self.connection.settimeout(CLIENT_TIMEOUT)
        return ok

    def do_GET(self) -> None:
        self._serve(body=True)

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def _not_allowed(self) -> None:
        self._reply(
            405,
            b"method not allowed: this endpoint is read-only\n",
            "text/plain; charset=utf-8",
            body=True,
            extra={"Allow": "GET, HEAD"},
        )

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _not_allowed

    def _serve(self, body: bool) -> None:
        path = urlsplit(self.path).path
        app = self.server.app
        try:
            if path == "/metrics":
                data, ctype = app.metrics(self.headers.get("Accept"))
                self._reply(200, data, ctype, body)
                return
            page = app.html() if path == "/" else None
        except Exception as exc:  # noqa: BLE001 - a bug in a renderer must not take the endpoint down
            self.server.log.error("http_render_failed", path=path, error=f"{type(exc).__name__}: {exc}")
            self._reply(500, b"internal error\n", "text/plain; charset=utf-8", body)
            return
        if page is not None:
            self._reply(200, page.encode("utf-8"), "text/html; charset=utf-8", body)
        else:
            self._reply(404, b"not found: see /metrics\n", "text/plain; charset=utf-8", body)

    def _reply(self, code: int, data: bytes, ctype: str, body: bool, extra: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # no access log: scrapes every 15 s would drown the events


class MetricsServer(ThreadingHTTPServer):
    """The HTTP server, bound at construction (``OSError`` when the port is taken)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], app: App, log: Any) -> None:
        host = address[0]
        if ":" in host:
            self.address_family = socket.AF_INET6
        self.app = app
        self.log = log
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._waiting: dict[Any, float] = {}  # connections still sending their request -> since
        self._waiting_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        super().__init__(address, _Handler)

    request_queue_size = LISTEN_BACKLOG

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection if a slot is free (making room by closing the longest-idle one), else close it."""
        if not self._slots.acquire(blocking=False):  # noqa: SIM102  the comment belongs to the second test
            # full: close the connection idle longest to make room (its read returns at once,
            # its thread ends and frees the slot as soon as it runs, however loaded the host);
            # only when every slot is answering a request is this one dropped
            if not self._evict_idlest() or not self._slots.acquire(timeout=REQUEST_DEADLINE):
                self.shutdown_request(request)
                return
        with self._waiting_lock:
            self._waiting[request] = time.monotonic()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.answering(request)
            self._slots.release()
            raise

    def answering(self, request: Any) -> None:
        """The connection ``request`` sent its request: no longer a candidate for eviction."""
        with self._waiting_lock:
            self._waiting.pop(request, None)

    def _evict_idlest(self) -> bool:
        with self._waiting_lock:
            if not self._waiting:
                return False
            oldest = min(self._waiting, key=self._waiting.__getitem__)
            del self._waiting[oldest]
        try:
            oldest.shutdown(socket.SHUT_RDWR)  # its blocked read returns at once
        except OSError:  # closed already
            pass
        return True

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Serve the connection in its own thread, then free its slot."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.answering(request)
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Log an error from serving a client; a client that went away or was too slow is not one."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, socket.timeout)):
            return  # the client went away or was too slow: nothing to report
        self.log.warning(
            "http_error",
            client=str(client_address[0]) if client_address else None,
            error=f"{type(exc).__name__}: {exc}",
        )

    def start(self) -> None:
        """Serve in a background thread (polling for shutdown twice a second)."""
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.5}, name="topoagent-http", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving, wait briefly for the serving thread, and close the listening socket."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join(timeout=2)
            self._thread = None
        self.server_close()


def start(address: tuple[str, int], app: App, log: Any) -> MetricsServer:
    """Bind ``address`` and serve ``app`` in the background."""
    server = MetricsServer(address, app, log)
    server.start()
    return server
