"""The job's unique-id store on localhost, served by `ncclbind.trace run --checkpoint`:
one line per request, "PUT key hex" -> "OK", "GET key" -> "hex" once the key is there (the
shim's store.c is the client)."""
from __future__ import annotations

import socketserver
import threading


class _Handler(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline().decode(errors="replace").strip()
        parts = line.split(" ")
        server = self.server
        if len(parts) == 3 and parts[0] == "PUT":
            with server.changed:
                server.values[parts[1]] = parts[2]
                server.changed.notify_all()
            self.wfile.write(b"OK\n")
        elif len(parts) == 2 and parts[0] == "GET":
            with server.changed:
                if not server.changed.wait_for(lambda: parts[1] in server.values or server.closing, timeout=600):
                    return
                value = server.values.get(parts[1])
            if value is not None:
                self.wfile.write(value.encode() + b"\n")
        else:
            self.wfile.write(b"ERR bad request\n")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class StoreServer:
    def __init__(self, host: str = "127.0.0.1"):
        self._server = _Server((host, 0), _Handler)
        self._server.values = {}
        self._server.changed = threading.Condition()
        self._server.closing = False
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        with self._server.changed:
            self._server.closing = True
            self._server.changed.notify_all()
        self._server.shutdown()
        self._server.server_close()
