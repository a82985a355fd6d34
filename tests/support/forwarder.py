"""A plain TCP forwarder: a broker reached at another address than its own.

The TLS tests reach a local broker at 127.0.0.2, an address its certificate does not
carry (as a client behind a wrong DNS name would), to see the host-name check refuse it.
"""

from __future__ import annotations

import contextlib
import socket
import threading

__all__ = ["Forwarder"]


class Forwarder:
    """TCP from ``listen_host`` to a target: the broker reached at an address (127.0.0.2)
    that its certificate does not carry, as a client behind a wrong DNS name would."""

    def __init__(self, listen_host: str, target: tuple[str, int]) -> None:
        self.server = socket.create_server((listen_host, 0))
        self.address = f"{listen_host}:{self.server.getsockname()[1]}"
        self.target = target
        self.sockets: list[socket.socket] = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.sockets.append(client)
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                return
            self.sockets.append(upstream)
            for a, b in ((client, upstream), (upstream, client)):
                t = threading.Thread(target=self._pipe, args=(a, b), daemon=True)
                self.threads.append(t)
                t.start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        for t in self.threads:
            t.join(5)
        for s in self.sockets:
            s.close()
