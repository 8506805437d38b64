"""What the page's server refuses before any route runs (docs/guide/security.md):

- a `Host` header that is not the address the request came in on (or localhost,
  127.0.0.1, [::1], or a name given in `hosts`), at that port: 403 (DNS rebinding);
- a POST, PUT, PATCH or DELETE whose `Origin` is present and not the page's own
  origin: 403 (a form or `text/plain` fetch from another site);
- an `/api/` request without `Authorization: Bearer <token>`: 401 (unless the app was
  built with no token);
- a body over `limit` bytes: 413.

Every answer also carries headers that keep the page out of frames and its address
(with the token) out of referrers.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Sequence
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

BODY_LIMIT = 64 * 1024  # bytes; the largest real request (a brush of every group) is a few KiB
LOOPBACK = ("localhost", "127.0.0.1", "::1")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    # Scripts from the bundle only (no inline script runs, should a label ever slip into
    # the DOM as HTML); 'unsafe-eval' because Playwright, which drives the page in the tests
    # and the benchmark, evaluates its probes as strings (the page itself never does).
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
        b"img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
]


def new_token() -> str:
    """A random token, as Jupyter makes them (`secrets.token_urlsafe`)."""
    return secrets.token_urlsafe(32)


class Guard:
    """ASGI middleware applying the refusals above, then the app."""

    def __init__(self, app: ASGIApp, token: str | None, hosts: Sequence[str] = (), limit: int = BODY_LIMIT) -> None:
        self.app = app
        self.token = token
        self.hosts = {_bare(h.lower()) for h in (*LOOPBACK, *hosts)}
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets here
            return
        send = _with_headers(send, scope["path"])
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if not self._host_allowed(scope, host):
            await _refuse(send, 403, f"Host {host[:80]!r} is not the address this server listens on")
            return
        origin = headers.get("origin")
        if scope["method"] not in SAFE_METHODS and origin is not None and origin.lower() != f"{scope['scheme']}://{host}".lower():
            await _refuse(send, 403, f"cross-origin request from {origin[:80]!r} refused")
            return
        if self.token is not None and (scope["path"] == "/api" or scope["path"].startswith("/api/")):
            given = headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.token.encode()):
                await _refuse(send, 401, "missing or wrong token: open the address `ember ui` printed (with ?token=...)",
                              [(b"www-authenticate", b"Bearer")])
                return
        length = headers.get("content-length")
        if length is not None:
            if not (length.isascii() and length.isdigit()):
                await _refuse(send, 400, "a bad Content-Length")
                return
            if int(length) > self.limit:
                await _refuse(send, 413, f"the request body is over {self.limit} bytes")
                return
        body = bytearray()
        while True:  # the whole body now (it is small), so that a chunked one is bounded too
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if len(body) > self.limit:
                await _refuse(send, 413, f"the request body is over {self.limit} bytes")
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(bytes(body), receive), send)

    def _host_allowed(self, scope: Scope, host: str) -> bool:
        name, port = _split(host, 443 if scope["scheme"] == "https" else 80)
        if name is None:
            return False
        server = scope.get("server")
        if server is None:  # a Unix socket: only the loopback names and those given
            return name in self.hosts
        return port == int(server[1]) and (name in self.hosts or name == _bare(str(server[0]).lower()))


def _split(host: str, default_port: int) -> tuple[str | None, int]:
    """`name:port` (or `[v6]:port`, or a name alone) → lowercased name, port."""
    host = host.strip().lower()
    if host.startswith("["):
        name, close, rest = host[1:].partition("]")
        if not close or (rest and not rest.startswith(":")):
            return None, 0
        port = rest[1:]
    else:
        name, _, port = host.partition(":")
        if ":" in port:
            return None, 0
    if not name or (port and not port.isdigit()):
        return None, 0
    return name, int(port) if port else default_port


def _bare(name: str) -> str:
    return name[1:-1] if name.startswith("[") and name.endswith("]") else name


def _with_headers(send: Send, path: str) -> Send:
    """`send`, adding the security headers (and no caching of the page and the API)."""
    extra = HEADERS + ([(b"cache-control", b"no-store")] if not path.startswith("/static/") else [])

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return sending


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the body read already, then the client's later messages."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receiving() -> Message:
        return pending.pop() if pending else await receive()

    return receiving


async def _refuse(send: Send, status: int, reason: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    payload = json.dumps({"error": reason}).encode()
    start: dict[str, Any] = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *(headers or [])],
    }
    await send(start)
    await send({"type": "http.response.body", "body": payload})
