"""The local server of ``caffepy view``: the page and its curves, on 127.0.0.1 only.

Two paths exist: ``/`` (the page) and ``/curves.json`` (the training curves, read again from the
logs at each request, so an open page follows a run). Everything else is 404, and no part of a
request names a file. A request whose ``Host`` header is not ``127.0.0.1:PORT`` or
``localhost:PORT`` is refused with 403, so a web page that rebinds its own DNS name to 127.0.0.1
cannot read the server (DNS rebinding). Only GET and HEAD are answered.
"""
import http.server
import json
import threading

HEADERS = (("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-store"),
           ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY"),
           ("Cross-Origin-Resource-Policy", "same-origin"))


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "caffepy-view"
    sys_version = ""

    def log_message(self, fmt, *args):      # quiet: the command prints the URL once
        pass

    def _send(self, code, body, ctype):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in HEADERS:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _host_ok(self):
        port = self.server.server_address[1]
        return self.headers.get("Host", "") in ("127.0.0.1:%d" % port, "localhost:%d" % port)

    def do_GET(self):
        if not self._host_ok():
            return self._send(403, b"forbidden: Host must be 127.0.0.1 or localhost\n", "text/plain")
        path = self.path.split("?", 1)[0]
        if path in ("/", "/index.html"):
            return self._send(200, self.server.page(), "text/html; charset=utf-8")
        if path == "/curves.json":
            curves = self.server.curves() if self.server.curves else None
            return self._send(200, json.dumps(curves, allow_nan=False).encode("utf-8"),
                              "application/json")
        return self._send(404, b"not found\n", "text/plain")

    do_HEAD = do_GET

    def _refuse(self):
        self._send(405, b"method not allowed\n", "text/plain")

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse


class ViewServer(http.server.ThreadingHTTPServer):
    """``ViewServer(page, curves=None, port=0)``: ``page()`` returns the page's bytes,
    ``curves()`` the curves document (or None). Binds 127.0.0.1; ``url`` is where it listens."""
    daemon_threads = True

    def __init__(self, page, curves=None, port=0):
        super().__init__(("127.0.0.1", int(port)), _Handler)
        self.page, self.curves = page, curves

    @property
    def url(self):
        return "http://127.0.0.1:%d/" % self.server_address[1]

    def start(self):
        """Serve in a daemon thread (tests); returns the thread."""
        t = threading.Thread(target=self.serve_forever, daemon=True)
        t.start()
        return t
