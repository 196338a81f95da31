"""ASGI middleware (Starlette, FastAPI, Litestar): several limits in one RL.ALL per request.

Each request is keyed (by a header, the client's address, the path, or a
function of the scope), decided under every limit at once, all or nothing,
and answered as the README's client contract says: ``RateLimit-Policy`` and
``RateLimit`` on every response, and on a denial ``429`` with
``Retry-After`` and an ``application/problem+json`` body naming the limits
that denied.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from ._guard import Degraded, denial
from .aio import AsyncRateLimiter
from .decision import Decision
from .errors import Unavailable
from .policy import Duration, Policy

Scope = MutableMapping[str, Any]
"""An ASGI connection scope."""
Message = MutableMapping[str, Any]
"""An ASGI event."""
Receive = Callable[[], Awaitable[Message]]
"""The ASGI receive channel."""
Send = Callable[[Message], Awaitable[None]]
"""The ASGI send channel."""
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
"""An ASGI application."""
KeyFunc = Callable[[Scope], "str | Awaitable[str | None] | None"]
"""What a request is limited by; ``None`` lets the request through unlimited."""

UNAVAILABLE = json.dumps(
    {"type": "about:blank", "title": "Service Unavailable", "status": 503},
    separators=(",", ":"),
).encode()


def header_key(name: str) -> KeyFunc:
    """Limits by a request header (``x-api-key``); requests without it are not limited."""
    wanted = name.lower().encode("latin-1")

    def key(scope: Scope) -> str | None:
        for field, value in scope.get("headers", ()):
            if field == wanted:
                return bytes(value).decode("latin-1")
        return None

    return key


def client_address(scope: Scope) -> str | None:
    """Limits by the client's address as the server saw it (behind a proxy, use a header)."""
    client = scope.get("client")
    return str(client[0]) if client else None


def path_key(scope: Scope) -> str:
    """Limits by the request's path: one limit per endpoint, for everyone."""
    return str(scope.get("path", ""))


@dataclass(frozen=True, slots=True)
class HttpLimit:
    """One limit of the middleware: its header name, its policy and where its keys live.

    A per-client limit is keyed ``prefix + key`` (the key function's value); a
    ``shared`` one is the single key ``prefix``, counted for everyone. In a
    cluster all of a request's keys share a slot: use a hash tag.
    """

    name: str
    """The name in ``RateLimit``, ``RateLimit-Policy`` and the problem body."""
    policy: Policy
    """What is allowed."""
    prefix: str = "rl:"
    """The key prefix (per client), or the key (``shared``)."""
    shared: bool = False
    """One key for every client."""
    leased: bool = True
    """Decided from the limiter's ``leases`` where they lease its key (False: always sent)."""

    def key_for(self, client: str) -> str:
        """The Redis key of this limit for ``client``."""
        return self.prefix if self.shared else self.prefix + client


class RateLimitMiddleware:
    """Pure ASGI middleware deciding every HTTP request under ``limits`` in one ``RL.ALL``.

    - ``key``: what a request is limited by (default: the client address);
      ``None`` lets a request through unlimited.
    - ``wait``: queue a request on the server (``WAIT``) up to this long
      before answering 429.
    - ``jitter``: send ``JITTER``, so a 429's ``Retry-After`` is the
      server's spread wait (clients turned away together come back at the
      rate the limits admit, never before their true wait).
    - ``timeout``: the longest the middleware waits for Redis (added to
      ``wait``), in seconds; by default the limiter's ``deadline``.
    - ``fallback``: when Redis is unavailable (a connection error, the
      timeout, or the limiter's circuit open), ``"open"`` lets requests
      through, ``"closed"`` answers ``503`` with ``Retry-After``,
      ``"degraded"`` decides on a local limit at ``degraded_share`` of each
      limit's rate (429 as usual), whatever the limiter's own fallback.
      ``fail_open`` is the older switch between the first two
      (``fallback`` wins when given). A command error
      (a key of the wrong type, a bad policy) is never failed open: it
      propagates as the application's error.
    """

    def __init__(
        self,
        app: ASGIApp,
        limiter: AsyncRateLimiter,
        limits: Sequence[HttpLimit],
        *,
        key: KeyFunc = client_address,
        cost: int = 1,
        wait: Duration | None = None,
        timeout: float | None = None,
        fail_open: bool = True,
        fallback: Literal["open", "closed", "degraded"] | None = None,
        degraded_share: float = 1.0,
        jitter: bool = False,
    ) -> None:
        """Wraps ``app``; see the class for the parameters."""
        if not limits:
            raise ValueError("the middleware needs at least one limit")
        self.app = app
        self.limiter = limiter
        self.limits = tuple(limits)
        self.key = key
        self.fallback = fallback or ("open" if fail_open else "closed")
        self.degraded = Degraded(degraded_share)
        self._cost = cost
        self._policies = tuple(limit.policy.with_name(limit.name) for limit in self.limits)
        self._names = tuple(limit.name for limit in self.limits)
        self._options: dict[str, Any] = {}
        if cost != 1:
            self._options["cost"] = cost
        if timeout is not None:
            self._options["deadline"] = timeout
        if wait is not None:
            self._options["wait"] = wait
        if jitter:
            self._options["jitter"] = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Decides an HTTP request, then answers 429 or runs the app with the header fields."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = self.key(scope)
        if inspect.isawaitable(client):
            client = await client
        if client is None:
            await self.app(scope, receive, send)
            return
        pairs = [
            (limit.key_for(client), p) for limit, p in zip(self.limits, self._policies, strict=True)
        ]
        try:
            decision = await self._decide(pairs)
        except Unavailable:
            decision = self._fallback(pairs)
        else:
            if decision.fallback is not None:  # the middleware's fallback, not the limiter's
                decision = self._fallback(pairs)
            elif self.fallback == "degraded":
                self.degraded.observe(pairs, decision, self._cost)
        if decision.fallback == "open":
            await self.app(scope, receive, send)
            return
        if decision.fallback == "closed":
            retry = decision.retry_after.total_seconds() if decision.retry_after else 1
            fields = [(b"retry-after", str(max(1, math.ceil(retry))).encode())]
            await _respond(send, 503, fields, UNAVAILABLE)
            return
        fields = [
            (name.lower().encode(), value.encode())
            for name, value in decision.headers(self._names).items()
        ]
        if not decision.allowed:
            await _respond(send, 429, fields, decision.problem_json(self._names))
            return
        await self.app(scope, receive, _with_fields(send, fields))

    async def _decide(self, pairs: Sequence[tuple[str, Policy]]) -> Decision:
        """One ``RL.ALL``; with the limiter's ``leases``, the leased limits from their blocks.

        The other limits are then decided in one ``RL.ALL``; a request that
        one of them denies (or that fails, or is cancelled) puts the units it
        took from the blocks back.
        """
        leases = self.limiter.leases
        options = self._options
        leased = [
            leases is not None and limit.leased and leases.applies(k, p, options)  # type: ignore[arg-type]
            for limit, (k, p) in zip(self.limits, pairs, strict=True)
        ]
        if not any(leased):
            return await self.limiter.all(pairs, **options)
        assert leases is not None
        cost = self._cost
        decisions: list[Decision | None] = [None] * len(pairs)
        taken: list[tuple[str, Policy]] = []
        try:
            for i, (key, policy) in enumerate(pairs):
                if leased[i]:
                    d = await self.limiter.decide(key, policy, **options)
                    if d.fallback is not None:
                        return d
                    decisions[i] = d
                    if d.allowed:
                        taken.append((key, policy))
                    else:
                        break
            rest = [i for i, lease in enumerate(leased) if not lease]
            if rest and all(d is None or d.allowed for d in decisions):
                others = await self.limiter.all([pairs[i] for i in rest], **options)
                if others.fallback is not None:
                    return others
                for i, d in zip(rest, others.limits, strict=True):
                    decisions[i] = d
        except BaseException:
            for key, policy in taken:
                leases.put_back(key, policy, cost)
            raise
        decided = [d for d in decisions if d is not None]
        if not all(d.allowed for d in decided):
            for key, policy in taken:
                leases.put_back(key, policy, cost)
        return combined(decided, len(pairs))

    def _fallback(self, pairs: Sequence[tuple[str, Policy]]) -> Decision:
        if self.fallback == "degraded":
            return self.degraded.decide(pairs, self._cost)
        if self.fallback == "open":
            return Decision(True, 0, 0, None, timedelta(0), fallback="open")
        return denial(None, max(1.0, self.limiter.guard.circuit.retry_after()))


def combined(decided: Sequence[Decision], n: int) -> Decision:
    """The decision of limits decided apart, as one ``RL.ALL`` would answer it.

    A denial stops at the first limit that denies (``blocked_by``); the
    limits after it are not decided and not listed.
    """
    blocked = next((i for i, d in enumerate(decided) if not d.allowed), None)
    allowed = blocked is None and len(decided) == n
    tight = decided[blocked] if blocked is not None else min(decided, key=lambda d: d.remaining)
    return Decision(
        allowed,
        tight.limit,
        tight.remaining,
        None if allowed else tight.retry_after,
        max(d.reset_after for d in decided),
        blocked_by=blocked,
        limits=tuple(decided),
    )


def _with_fields(send: Send, fields: list[tuple[bytes, bytes]]) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), *fields]
        await send(message)

    return sending


async def _respond(send: Send, status: int, fields: list[tuple[bytes, bytes]], body: bytes) -> None:
    headers = [
        *fields,
        (b"content-type", b"application/problem+json"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
