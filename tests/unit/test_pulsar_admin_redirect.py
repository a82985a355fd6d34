"""The Pulsar admin client follows a broker's redirect to the bundle's owner.

In a cluster of more than one broker, an admin call on a namespace or topic that
another broker owns is answered ``307 Temporary Redirect`` with that broker's web
service URL; Pulsar's Java admin client follows it with the same method. urllib follows
no redirect of a DELETE or PUT: three Pulsar containers failed every run's clean-up with
"HTTP 307" until the client followed it itself.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pytest_brokerperf.brokers.pulsar.admin import _Rest
from pytest_brokerperf.core.errors import DriverError


class _Broker:
    """One broker's web service: owns nothing and redirects to ``owner``, or owns all."""

    def __init__(self, owner: str | None) -> None:
        self.seen: list[tuple[str, str, str | None, bytes]] = []
        broker = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                broker.seen.append((self.command, self.path,
                                    self.headers.get("Authorization"), body))
                if broker.owner is not None:
                    self.send_response(307)
                    self.send_header("Location", broker.owner + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(204)
                self.end_headers()

            do_DELETE = do_PUT = do_GET = _any

            def log_message(self, *args: object) -> None:
                pass

        self.owner = owner
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def brokers() -> Iterator[tuple[_Broker, _Broker]]:
    owner = _Broker(None)
    other = _Broker(owner.url)
    yield other, owner
    other.close()
    owner.close()


@pytest.mark.parametrize("method", ["DELETE", "PUT"])
def test_a_redirect_is_followed_with_the_same_method_body_and_token(
        brokers: tuple[_Broker, _Broker], method: str) -> None:
    other, owner = brokers
    rest = _Rest(other.url, token="t0ken", timeout=5)
    body = {"retentionTimeInMinutes": 1} if method == "PUT" else None
    path = "/admin/v2/persistent/public/ns/t/partitions?force=true"
    status, _ = rest.call(method, path, body)
    assert status == 204
    assert [s[:3] for s in other.seen] == [(method, path, "Bearer t0ken")]
    (got,) = owner.seen
    assert got[:3] == (method, path, "Bearer t0ken")
    assert got[3] == (b'{"retentionTimeInMinutes": 1}' if body else b"")


def test_a_redirect_loop_ends_in_an_error_naming_the_status(
        brokers: tuple[_Broker, _Broker]) -> None:
    other, _ = brokers
    other.owner = other.url  # redirects to itself
    with pytest.raises(DriverError, match="HTTP 307"):
        _Rest(other.url, timeout=5).call("DELETE", "/admin/v2/namespaces/public/ns")
    assert len(other.seen) == _Rest.MAX_REDIRECTS + 1


def test_https_is_never_redirected_to_plain_http() -> None:
    rest = _Rest("https://127.0.0.1:1", timeout=1)
    rest._once = lambda *a: (307, "", "http://127.0.0.1:2/x")  # type: ignore[method-assign]
    with pytest.raises(DriverError, match="refused"):
        rest.call("DELETE", "/x")
