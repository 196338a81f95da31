"""A decision as one value, read the same from RESP2 arrays and RESP3 maps."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .policy import Policy

PROBLEM_TYPE = "https://iana.org/assignments/http-problem-types#quota-exceeded"
PROBLEM_TITLE = "Request cannot be satisfied as assigned quota has been exceeded"


@dataclass(frozen=True, slots=True)
class Decision:
    """What the module decided for one call.

    For ``RL.ALL`` and ``RL.SHARE`` the per-limit decisions are in
    ``limits`` (in key order) and ``blocked_by`` names the one that decides a
    denial; ``limit`` and ``remaining`` are then those of the tightest limit
    (the deciding one on a denial, the one with the least remaining
    otherwise) and ``reset_after`` the longest.
    """

    allowed: bool
    """Whether the request was admitted."""
    limit: int
    """The most that can be admitted at once (burst, capacity, window limit)."""
    remaining: int
    """How many requests of cost 1 would be admitted right now."""
    retry_after: timedelta | None
    """On a denial, the wait until this same request would be admitted;
    ``None`` when admitted, or when it never can be (a cost above the limit)."""
    reset_after: timedelta
    """The time until the key is back to full (its TTL)."""
    granted: int | None = None
    """With ``partial=True``: the units charged."""
    lease: str | None = None
    """RL.ACQUIRE, ``CONCURRENCY``: the lease to release or renew."""
    shadow_denied: bool = False
    """A ``SHADOW`` named policy admitted what enforcing it would have denied."""
    blocked_by: int | None = None
    """RL.ALL, RL.SHARE: the index of the limit that decides a denial."""
    limits: tuple[Decision, ...] = ()
    """RL.ALL, RL.SHARE: each limit's own decision, in key order."""
    policy: Policy | None = None
    """The policy decided, when the call named one (for the header fields)."""
    fallback: str | None = None
    """``None`` when the server decided; else the fallback that answered while
    Redis was unavailable: ``"open"``, ``"closed"`` or ``"degraded"``."""

    def __bool__(self) -> bool:
        """A decision is true when the request was admitted."""
        return self.allowed

    def headers(self, names: Sequence[str] | None = None) -> dict[str, str]:
        """The HTTP response fields of the README's client contract.

        ``RateLimit-Policy`` lists each limit with a rate (``q`` per ``w``
        seconds), ``RateLimit`` what is left of each (``r``) and for how long
        (``t``, at most ``w``), and a denial with a known wait adds
        ``Retry-After`` (seconds, rounded up); ``RateLimit`` then names only
        the deciding limit, its ``t`` equal to ``Retry-After``. Limits
        without a rate (a concurrency limit, a named policy) are left out.
        ``names`` overrides the policies' names, one per limit.
        """
        decisions = self.limits or (self,)
        named = [
            (names[i] if names is not None else _label(d, i), d) for i, d in enumerate(decisions)
        ]
        rated = [(n, d, d.policy.quota) for n, d in named if d.policy and d.policy.quota]
        fields: dict[str, str] = {}
        if rated:
            fields["RateLimit-Policy"] = ", ".join(f'"{n}";q={q.q};w={q.w}' for n, _, q in rated)
        deciding = self._deciding()
        if deciding is not None:
            i, wait_ms = deciding
            wait = -(-wait_ms // 1000)
            d = decisions[i]
            if d.policy is not None and d.policy.quota is not None:
                fields["RateLimit"] = f'"{named[i][0]}";r={d.remaining};t={wait}'
            fields["Retry-After"] = str(wait)
        elif rated:
            items = []
            for n, d, q in rated:
                until = d.retry_after if d.remaining == 0 and d.retry_after else d.reset_after
                t = min(_ceil_seconds(until), q.w)
                items.append(f'"{n}";r={d.remaining};t={t}')
            fields["RateLimit"] = ", ".join(items)
        return fields

    def problem(self, names: Sequence[str] | None = None) -> dict[str, Any]:
        """The ``application/problem+json`` body of a 429, naming the limits that denied."""
        decisions = self.limits or (self,)
        violated = [
            names[i] if names is not None else _label(d, i)
            for i, d in enumerate(decisions)
            if not d.allowed
        ]
        return {"type": PROBLEM_TYPE, "title": PROBLEM_TITLE, "violated-policies": violated}

    def problem_json(self, names: Sequence[str] | None = None) -> bytes:
        """:meth:`problem` encoded as JSON bytes."""
        return json.dumps(self.problem(names), separators=(",", ":")).encode()

    def _deciding(self) -> tuple[int, int] | None:
        """On a denial with a known wait: the deciding limit and the wait in ms.

        The deciding limit has the longest wait; the wait is never shorter
        than any denying limit's own.
        """
        if self.allowed or self.retry_after is None:
            return None
        wait = _ms(self.retry_after)
        if not self.limits:
            return 0, wait
        best, longest = 0, -1
        for i, d in enumerate(self.limits):
            if not d.allowed and d.retry_after is not None and _ms(d.retry_after) > longest:
                best, longest = i, _ms(d.retry_after)
        return best, max(wait, longest)


def _label(d: Decision, i: int) -> str:
    return d.policy.label if d.policy is not None else f"limit-{i + 1}"


def _ms(t: timedelta) -> int:
    return (t.days * 86_400 + t.seconds) * 1000 + -(-t.microseconds // 1000)


def _ceil_seconds(t: timedelta) -> int:
    return -(-_ms(t) // 1000)


# Replies. A RESP2 decision is an array of five integers and, where they
# apply, `granted` (an integer, with PARTIAL), `lease` (a string or nil) and
# `shadow_denied` (an integer, a SHADOW policy through RL.CHECK); RESP3 is a
# map with those names. redis-py gives map keys as bytes unless it decodes.


def _duration(ms: int) -> timedelta:
    return timedelta(milliseconds=ms)


def _text(v: Any) -> str | None:
    if v is None:
        return None
    return v.decode() if isinstance(v, bytes) else str(v)


def _normal(m: Mapping[Any, Any]) -> Mapping[str, Any]:
    for k in m:
        if isinstance(k, bytes):
            return {k.decode(): v for k, v in m.items()}
        break
    return m


_FIELDS = ("allowed", "limit", "remaining", "retry_after_ms", "reset_after_ms")
_BYTE_FIELDS = tuple(f.encode() for f in _FIELDS)


def parse_decision(reply: Any, policy: Policy | None, partial: bool) -> Decision:
    """A single-key command's reply (RL.GCRA ... RL.ACQUIRE, RL.CHECK, RL.PEEK)."""
    if isinstance(reply, Mapping):
        names = _BYTE_FIELDS if b"allowed" in reply else _FIELDS
        allowed, limit, remaining, retry, reset = (reply[n] for n in names)
        if len(reply) == 5:
            extra: Mapping[str, Any] = {}
        else:
            extra = _normal(reply)
        return Decision(
            bool(allowed),
            limit,
            remaining,
            None if retry < 0 else _duration(retry),
            _duration(reset),
            extra.get("granted"),
            _text(extra.get("lease")),
            bool(extra.get("shadow_denied", False)),
            None,
            (),
            policy,
        )
    allowed, limit, remaining, retry, reset, *rest = reply
    granted: int | None = None
    lease: str | None = None
    shadow = False
    for v in rest:
        if v is None or isinstance(v, (bytes, str)):
            lease = _text(v)
        elif partial and granted is None:
            granted = v
        else:
            shadow = bool(v)
    return Decision(
        bool(allowed),
        limit,
        remaining,
        None if retry < 0 else _duration(retry),
        _duration(reset),
        granted,
        lease,
        shadow,
        None,
        (),
        policy,
    )


def parse_all(reply: Any, policies: Sequence[Policy | None], partial: bool) -> Decision:
    """An ``RL.ALL``, ``RL.SHARE`` or ``RL.SHARE.PEEK`` reply."""
    if isinstance(reply, Mapping):
        m = _normal(reply)
        allowed, blocked, retry, replies = (
            m["allowed"],
            m["blocked_by"],
            m["retry_after_ms"],
            m["limits"],
        )
    else:
        allowed, blocked, retry, *replies = reply
    limits = tuple(parse_decision(r, p, partial) for r, p in zip(replies, policies, strict=True))
    tight = limits[blocked] if blocked >= 0 else min(limits, key=lambda d: d.remaining)
    return Decision(
        bool(allowed),
        tight.limit,
        tight.remaining,
        None if retry < 0 else _duration(retry),
        max(d.reset_after for d in limits),
        limits[0].granted if partial else None,
        next((d.lease for d in limits if d.lease is not None), None),
        False,
        None if blocked < 0 else blocked,
        limits,
        None,
    )


@dataclass(frozen=True, slots=True)
class Reservation:
    """A reservation's answer (``RESERVE max_delay``): the decision, and when it starts."""

    decision: Decision
    """Admitted (charged now), or denied as without ``RESERVE`` (nothing charged)."""
    delay: timedelta | None
    """Admitted: the delay after which the admission starts (zero: at once;
    rounded up to the millisecond, never early). ``None`` when denied."""

    def __bool__(self) -> bool:
        """A reservation is true when it was admitted."""
        return self.decision.allowed


def parse_reservation(reply: Any, policy: Policy | None) -> tuple[Decision, int]:
    """A reply with ``delay_ms`` (RESP2: the sixth field; RESP3: the map entry)."""
    if isinstance(reply, Mapping):
        delay = _normal(reply)["delay_ms"]
        rest = {k: v for k, v in reply.items() if k not in ("delay_ms", b"delay_ms")}
        return parse_decision(rest, policy, False), int(delay)
    return parse_decision(reply[:5], policy, False), int(reply[5])


def reservation(decision: Decision, delay_ms: int | None) -> Reservation:
    """The reservation of a decision; a fallback's admission (no delay known) starts at once."""
    if not decision.allowed or (delay_ms is not None and delay_ms < 0):
        return Reservation(decision, None)
    return Reservation(decision, _duration(delay_ms or 0))


def parse_throttle(reply: Any) -> Decision:
    """A ``CL.THROTTLE`` reply: redis-cell's array (seconds, ``limited`` first)."""
    limited, limit, remaining, retry, reset = reply
    return Decision(
        not limited,
        limit,
        remaining,
        None if retry < 0 else timedelta(seconds=retry),
        timedelta(seconds=reset),
    )
