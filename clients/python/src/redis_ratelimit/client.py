"""Typed calls over a blocking redis-py client (``redis.Redis`` or ``RedisCluster``)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from types import TracebackType
from typing import Any, Literal, Protocol, Unpack

import redis
import redis.backoff
import redis.exceptions
import redis.retry

from . import _commands, _leased
from ._commands import Options
from ._guard import (
    DEFAULT_DEADLINE,
    OUTAGE,
    PROBE_INTERVAL,
    Fallback,
    Guard,
    client_options,
    timeout,
)
from ._landing import (
    ORPHAN_WAIT,
    Land,
    Landings,
    Undo,
    lander,
    undo_all,
    undo_decide,
    undo_throttle,
)
from .decision import (
    Decision,
    Reservation,
    parse_all,
    parse_decision,
    parse_reservation,
    parse_throttle,
    reservation,
)
from .deny_cache import DenyCache, pace
from .errors import CommandError, LimitExceeded, Unavailable, server_error
from .leasing import HOT_POLL, Leases
from .policy import Duration, Node, Policy, duration_ms, duration_word

Limits = Sequence[tuple[str | bytes, Policy | None]]
CACHEABLE = frozenset({"cost", "deadline"})
"""The options of a call the deny cache may answer (``wait``, ``dryrun``, ... go to the server)."""


class SyncClient(Protocol):
    """What the limiter needs of a client: ``redis.Redis``, ``redis.cluster.RedisCluster``."""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        """Sends one command and returns its reply."""


class RateLimiter:
    """The module's commands as typed calls on a blocking redis-py client.

    Works with RESP2 and RESP3 connections alike (``protocol=2`` or ``3``)
    and with ``decode_responses`` on or off; in a cluster, the keys of one
    ``RL.ALL`` or ``RL.SHARE`` must share a hash slot (``{tag}``). A server
    error is raised as :class:`~redis_ratelimit.CommandError` with the
    server's message.

    Every call waits at most ``deadline`` seconds for Redis (plus its own
    ``wait``; ``deadline=`` on a call overrides it). A decision that meets
    an outage (a connection error or the deadline) answers ``fallback``:
    ``"raise"`` :class:`~redis_ratelimit.Unavailable`, ``"open"`` admits,
    ``"closed"`` denies, ``"degraded"`` decides on a local limit at
    ``degraded_share`` of each limit's rate. From the first outage on, the
    fallback answers at once, while one call every ``probe_interval``
    seconds looks whether Redis is back (a ``PING``, then its decision).
    """

    def __init__(
        self,
        client: SyncClient,
        *,
        deadline: float = DEFAULT_DEADLINE,
        fallback: Fallback = "raise",
        degraded_share: float = 1.0,
        probe_interval: float = PROBE_INTERVAL,
        deny_cache: DenyCache | None = None,
        leases: Leases | None = None,
    ) -> None:
        """A limiter sending its commands through ``client``."""
        self.client = client
        self.guard = Guard(deadline, fallback, degraded_share, probe_interval)
        self.deny_cache = deny_cache
        self.leases = leases
        self.follower: Any = None
        """The hot-key poll the first decision started with ``Leases(hot=True)`` (to stop)."""
        self.landings = Landings()
        """The calls given up after they were written, finishing in the background."""

    @classmethod
    def from_url(
        cls,
        url: str = "redis://localhost:6379",
        *,
        deadline: float = DEFAULT_DEADLINE,
        fallback: Fallback = "raise",
        degraded_share: float = 1.0,
        probe_interval: float = PROBE_INTERVAL,
        deny_cache: DenyCache | None = None,
        leases: Leases | None = None,
        **options: Any,
    ) -> RateLimiter:
        """A limiter on a client of its own whose every wait ends by ``deadline``.

        The client does not retry, connects and reads within the deadline
        and speaks RESP2 (:func:`redis_ratelimit.client_options`);
        ``options`` go to :func:`redis.from_url` after those.
        """
        settings = {**client_options(deadline), "retry": no_retry(), **options}
        client = redis.from_url(url, **settings)
        return cls(
            client,
            deadline=deadline,
            fallback=fallback,
            degraded_share=degraded_share,
            probe_interval=probe_interval,
            deny_cache=deny_cache,
            leases=leases,
        )

    def _send(self, args: Sequence[Any], seconds: float, land: Land | None = None) -> Any:
        """One command, its reply awaited at most ``seconds`` (a plain ``redis.Redis``).

        A command written whose reply is late lands in the background: its
        reply is read there and ``land`` (from that reply) gives back what it
        took. Other clients (a cluster) wait as long as their own socket
        timeout.
        """
        client = self.client
        if not isinstance(client, redis.Redis) or client.connection is not None:
            try:
                return client.execute_command(*args)
            except redis.exceptions.ResponseError as e:
                raise server_error(e) from None
        pool = client.connection_pool
        start = time.monotonic()
        conn = pool.get_connection()
        try:
            conn.send_command(*args)  # type: ignore[no-untyped-call]
        except BaseException:
            conn.disconnect()  # type: ignore[no-untyped-call]
            pool.release(conn)
            raise
        try:
            ready = conn.can_read(timeout=max(seconds, 0.001))
        except BaseException:
            conn.disconnect()  # type: ignore[no-untyped-call]
            pool.release(conn)
            raise
        if not ready:  # written, unanswered: it lands in the background
            self.landings.sync(
                pool, conn, land, ORPHAN_WAIT + seconds, self.guard.circuit.succeeded
            )
            raise redis.exceptions.TimeoutError(f"no reply within {seconds:.3f} s")
        try:  # the rest of a reply begun: at most the deadline's remainder
            reply = conn.read_response(timeout=max(seconds - (time.monotonic() - start), 0.001))
        except redis.exceptions.ResponseError as e:
            pool.release(conn)
            raise server_error(e) from None
        except BaseException:
            conn.disconnect()  # type: ignore[no-untyped-call]  # a late reply must not be read
            pool.release(conn)
            raise
        pool.release(conn)
        return reply

    def _run(self, args: Sequence[Any]) -> Any:
        return self._send(args, self.guard.deadline)

    def _decide(
        self,
        args: Sequence[Any],
        limits: Limits,
        options: Options,
        parse: Callable[[Any], Decision],
        slot: Hashable = None,
        paced: Policy | None = None,
        undo: Undo | None = None,
    ) -> Decision:
        """Sends a decision within its deadline, or answers the deny cache or the fallback."""
        self._follow()
        cost = options.get("cost", 1)
        cache = self.deny_cache if slot is not None and options.keys() <= CACHEABLE else None
        flying = False
        if cache is not None:
            denied, flying = cache.check(slot, cost)
            if denied is not None:
                return denied
        wait = duration_ms(options["wait"]) if "wait" in options else 0
        seconds = timeout(self.guard, options.get("deadline"), wait)
        try:
            reply = self._guarded(args, seconds, lander(parse, undo))
            decision = parse(reply)
            if cache is not None:
                cache.observe(slot, cost, decision, pace(paced))
            if self.guard.fallback == "degraded":
                self.guard.degraded.observe(limits, decision, cost)
        except Unavailable as e:
            return self.guard.answer(limits, cost, e)
        finally:
            if flying:
                cache.landed(slot)  # type: ignore[union-attr]
        return decision

    def _guarded(self, args: Sequence[Any], seconds: float, land: Land | None = None) -> Any:
        """One command through the circuit within ``seconds``; ``Unavailable`` on an outage."""
        circuit = self.guard.circuit
        step = circuit.step()
        if step == "skip":
            raise Unavailable("Redis is unavailable (the circuit is open)")
        start = time.monotonic()
        try:
            if step == "probe":
                self._send(("PING",), seconds)
            reply = self._send(args, seconds - (time.monotonic() - start), land)
        except CommandError:
            circuit.succeeded()
            raise
        except OUTAGE as e:
            circuit.failed()
            raise Unavailable(f"Redis is unavailable: {e}") from e
        except BaseException:
            if step == "probe":
                circuit.abandoned()
            raise
        circuit.succeeded()
        return reply

    def decide(self, key: str | bytes, policy: Policy, **options: Unpack[Options]) -> Decision:
        """Decides one request on ``key`` under ``policy`` with its single-key command.

        With ``leases`` and a key they lease, it is answered from the key's block.
        """
        self._follow()
        if self.leases is not None and self.leases.applies(key, policy, options):
            return _leased.decide(self, self.leases, key, policy, options)
        args, partial = _commands.decide(key, policy, options)
        return self._decide(
            args,
            [(key, policy)],
            options,
            lambda r: parse_decision(r, policy, partial),
            (key, policy.words),
            policy,
            undo_decide(key, policy, options),
        )

    def _follow(self) -> None:
        """Starts the hot-key poll of ``Leases(hot=True)`` at the first decision."""
        if self.leases is not None and self.leases.start_following():
            self.follower = self.follow_hot_keys(self.leases.poll or HOT_POLL)

    def refund_leases(self, idle: float | None = None) -> int:
        """Gives back with ``REFUND`` the units of the leases unused for ``idle`` seconds.

        ``None``: every lease's (at shutdown). Returns the units refunded.
        """
        leases = self.leases
        if leases is None:
            return 0
        taken = leases.all_units() if idle is None else leases.idle(idle, time.monotonic())
        return _leased.refund(self, leases, taken)

    def refresh_hot_keys(self) -> frozenset[bytes]:
        """One poll of ``RL.HOTKEYS``: the keys leased as hot now (their first 64 bytes).

        A key no longer hot has its units refunded and is decided per request again.
        """
        if self.leases is None or not self.leases.hot:
            raise ValueError("the limiter has no Leases(hot=True)")
        return _leased.refresh(self, self.leases)

    def follow_hot_keys(self, every: float = HOT_POLL) -> _leased.Follower:
        """A thread polling the hot keys every ``every`` seconds (``.stop()`` ends it)."""
        return _leased.Follower(self.refresh_hot_keys, every)

    def reserve(
        self,
        key: str | bytes,
        policy: Policy,
        max_delay: Duration,
        **options: Unpack[Options],
    ) -> Reservation:
        """``RESERVE max_delay``: admitted now if ``key`` would admit within ``max_delay``.

        The admission is charged now and starts after
        :attr:`Reservation.delay`: sleep that long, then go, without asking
        again. Beyond ``max_delay`` it is denied as without it (``delay``
        ``None``, nothing charged). GCRA and bucket policies (the server
        refuses the others by name); a fallback's admission starts at once.
        """
        args, _ = _commands.decide(key, policy, options)
        args += ("RESERVE", duration_word(max_delay))
        delay: list[int] = []

        def parse(reply: Any) -> Decision:
            decision, ms = parse_reservation(reply, policy)
            delay.append(ms)
            return decision

        decision = self._decide(
            args, [(key, policy)], options, parse, undo=undo_decide(key, policy, options)
        )
        return reservation(decision, delay[0] if delay else None)

    def gcra(
        self,
        key: str | bytes,
        limit: int,
        period: Duration,
        *,
        burst: int | None = None,
        **options: Unpack[Options],
    ) -> Decision:
        """``RL.GCRA``: a sustained ``limit`` per ``period``, bursts of ``burst``."""
        return self.decide(key, Policy.gcra(limit, period, burst=burst), **options)

    def bucket(
        self,
        key: str | bytes,
        capacity: int,
        refill: int,
        period: Duration,
        **options: Unpack[Options],
    ) -> Decision:
        """``RL.BUCKET``: ``capacity`` tokens, ``refill`` more per ``period``."""
        return self.decide(key, Policy.bucket(capacity, refill, period), **options)

    def sliding(
        self,
        key: str | bytes,
        limit: int,
        window: Duration,
        *,
        mode: Literal["exact", "approx"] = "exact",
        buckets: int | None = None,
        **options: Unpack[Options],
    ) -> Decision:
        """``RL.SLIDING``: at most ``limit`` in any ``window`` (``mode`` exact or approx)."""
        policy = Policy.sliding(limit, window, mode=mode, buckets=buckets)
        return self.decide(key, policy, **options)

    def fixed(
        self,
        key: str | bytes,
        limit: int,
        window: Duration,
        *,
        aligned: bool = False,
        **options: Unpack[Options],
    ) -> Decision:
        """``RL.FIXED``: ``limit`` per window, from the first request or ``aligned``."""
        return self.decide(key, Policy.fixed(limit, window, aligned=aligned), **options)

    def sketch(
        self,
        key: str | bytes,
        item: str | bytes,
        limit: int,
        window: Duration,
        *,
        width: int | None = None,
        depth: int | None = None,
        cost: int | None = None,
        dryrun: bool = False,
    ) -> Decision:
        """``RL.SKETCH``: ``limit`` per ``window`` for each ``item``, in one sketch at ``key``."""
        args = _commands.sketch(key, item, limit, window, width, depth, cost, dryrun)
        limits = _commands.sketch_limits(key, item, limit, window)
        options: Options = {"cost": cost} if cost is not None else {}
        return self._decide(args, limits, options, lambda r: parse_decision(r, None, False))

    def all(
        self,
        limits: Sequence[tuple[str | bytes, Policy]],
        *,
        costs: Sequence[int] | None = None,
        refund_costs: Sequence[int] | None = None,
        **options: Unpack[Options],
    ) -> Decision:
        """``RL.ALL``: every ``(key, policy)`` admits, all charged, or none changes."""
        args, partial = _commands.all_limits(limits, costs, refund_costs, options)
        policies = [p for _, p in limits]
        slot = (
            tuple((k, p.words) for k, p in limits),
            tuple(costs or ()),
            tuple(refund_costs or ()),
        )
        return self._decide(
            args,
            limits,
            options,
            lambda r: parse_all(r, policies, partial),
            slot,
            undo=undo_all(limits, costs, options) if refund_costs is None else None,
        )

    def share(
        self, path: Sequence[tuple[str | bytes, Node]], **options: Unpack[Options]
    ) -> Decision:
        """``RL.SHARE``: limits along a path, leaf first, lending unused capacity."""
        args = _commands.share("RL.SHARE", path, options)
        limits = _commands.share_limits(path)
        nothing = [None] * len(path)
        return self._decide(args, limits, options, lambda r: parse_all(r, nothing, False))

    def share_peek(self, path: Sequence[tuple[str | bytes, Node]]) -> Decision:
        """``RL.SHARE.PEEK``: what one unit at the leaf would get now, changing nothing."""
        args = _commands.share("RL.SHARE.PEEK", path, None)
        return parse_all(self._run(args), [None] * len(path), False)

    def check(
        self, key: str | bytes, name: str, *fallbacks: str, **options: Unpack[Options]
    ) -> Decision:
        """``RL.CHECK``: decides under the first defined of the named policies."""
        return self.decide(key, Policy.named(name, *fallbacks), **options)

    def peek(self, key: str | bytes, policy: Policy) -> Decision:
        """``RL.PEEK``: a look at a limiter that changes nothing."""
        return parse_decision(self._run(("RL.PEEK", key, *policy.words)), policy, False)

    def acquire(
        self, key: str | bytes, limit: int, ttl: Duration, **options: Unpack[Options]
    ) -> Decision:
        """``RL.ACQUIRE``: a lease of ``cost`` units of ``limit``, ending after ``ttl``."""
        return self.decide(key, Policy.concurrency(limit, ttl), **options)

    def release(self, key: str | bytes, lease: str) -> bool:
        """``RL.RELEASE``: true if the lease was held (not expired, not released)."""
        return bool(self._run(("RL.RELEASE", key, lease)))

    def renew(self, key: str | bytes, lease: str, ttl: Duration) -> bool:
        """``RL.RENEW``: the lease now ends ``ttl`` from now; false if it had ended."""
        return bool(self._run(("RL.RENEW", key, lease, duration_word(ttl))))

    def throttle(
        self,
        key: str | bytes,
        max_burst: int,
        count: int,
        period: int,
        quantity: int = 1,
        *,
        deadline: float | None = None,
    ) -> Decision:
        """``CL.THROTTLE`` (redis-cell): ``count`` per ``period`` s, bursts of ``max_burst + 1``.

        ``quantity`` 0 peeks; a negative one gives back. ``deadline``: as
        :class:`Options`' (the limiter's by default).
        """
        limit = ("CL.THROTTLE", key, max_burst, count, period)
        limits = [(key, Policy.gcra(count, period, burst=max_burst + 1))]
        # A give-back takes nothing from the deny cache or degraded mode.
        options: Options = {"cost": max(quantity, 0)}
        if deadline is not None:
            options["deadline"] = deadline
        undo = undo_throttle(limit, quantity)
        return self._decide((*limit, quantity), limits, options, parse_throttle, undo=undo)

    def clock(self) -> int:
        """``RL.CLOCK``: the limiter's time, microseconds since the epoch."""
        return int(self._run(("RL.CLOCK",)))

    def set_clock(self, us: int) -> int:
        """``RL.CLOCK SET``: sets a manual clock (module loaded with ``clock manual``)."""
        return int(self._run(("RL.CLOCK", "SET", us)))

    def advance_clock(self, by: Duration | int) -> int:
        """``RL.CLOCK ADVANCE``: moves a manual clock by ``by`` (an int is microseconds)."""
        us = by if isinstance(by, int) else duration_ms(by) * 1000
        return int(self._run(("RL.CLOCK", "ADVANCE", us)))

    def lease(
        self,
        key: str | bytes,
        limit: int,
        ttl: Duration,
        *,
        renew_every: Duration | None = None,
        **options: Unpack[Options],
    ) -> Lease:
        """A concurrency lease as a context manager: held in the body, released on exit.

        While the body runs a thread renews it every ``renew_every`` (a
        third of ``ttl`` by default). Entering raises
        :class:`~redis_ratelimit.LimitExceeded` when it is denied (with
        ``wait=``, after waiting up to that long on the server).
        """
        return Lease(self, key, limit, ttl, renew_every, options)


def no_retry() -> redis.retry.Retry:
    """redis-py's retry that does not: the deadline is the limiter's."""
    return redis.retry.Retry(redis.backoff.NoBackoff(), 0)


def renew_interval(ttl: Duration, renew_every: Duration | None) -> float:
    """Seconds between renewals: ``renew_every``, else a third of ``ttl``."""
    return duration_ms(renew_every if renew_every is not None else ttl) / (
        1000 if renew_every is not None else 3000
    )


class Lease:
    """A held concurrency lease (see :meth:`RateLimiter.lease`)."""

    def __init__(
        self,
        limiter: RateLimiter,
        key: str | bytes,
        limit: int,
        ttl: Duration,
        renew_every: Duration | None,
        options: Options,
    ) -> None:
        """A lease to take on entry; use :meth:`RateLimiter.lease`."""
        self.limiter = limiter
        self.key = key
        self.ttl = ttl
        self.policy = Policy.concurrency(limit, ttl)
        self.options = options
        self.interval = renew_interval(ttl, renew_every)
        self.decision: Decision | None = None
        self.renewals = 0
        """How many renewals the server accepted."""
        self.lost = False
        """True once a renewal found the lease ended (its TTL passed first)."""
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    @property
    def id(self) -> str:
        """The lease's id, as RL.ACQUIRE returned it."""
        if self.decision is None or self.decision.lease is None:
            raise RuntimeError("the lease is not held")
        return self.decision.lease

    def __enter__(self) -> Lease:
        """Acquires the lease and starts renewing it."""
        decision = self.limiter.decide(self.key, self.policy, **self.options)
        if not decision.allowed or decision.lease is None:
            raise LimitExceeded(decision)
        self.decision = decision
        self._renewer = threading.Thread(target=self._renew, name="rl-lease-renew", daemon=True)
        self._renewer.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                held = self.limiter.renew(self.key, self.id, self.ttl)
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                continue  # the server may come back before the TTL passes
            except CommandError:
                held = False  # e.g. the key was replaced: the lease is gone
            if not held:
                self.lost = True
                return
            self.renewals += 1

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stops renewing and releases the lease (it ends at its TTL if Redis is unreachable)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        with contextlib.suppress(redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            self.limiter.release(self.key, self.id)
