"""Typed calls over redis-py's asyncio client (``redis.asyncio.Redis`` or ``RedisCluster``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Hashable, Sequence
from types import TracebackType
from typing import Any, Literal, Protocol, Unpack

import redis.asyncio
import redis.asyncio.retry
import redis.backoff
import redis.exceptions

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
    Flight,
    Land,
    Landings,
    Undo,
    lander,
    round_trip,
    undo_all,
    undo_decide,
    undo_throttle,
)
from .client import CACHEABLE, Limits, renew_interval
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


class AsyncClient(Protocol):
    """What the limiter needs of a client: ``redis.asyncio.Redis``, ``...cluster.RedisCluster``."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        """Sends one command and returns its reply."""


class AsyncRateLimiter:
    """The module's commands as typed calls on an asyncio redis-py client.

    Works with RESP2 and RESP3 connections alike (``protocol=2`` or ``3``)
    and with ``decode_responses`` on or off; in a cluster, the keys of one
    ``RL.ALL`` or ``RL.SHARE`` must share a hash slot (``{tag}``). A server
    error is raised as :class:`~redis_ratelimit.CommandError` with the
    server's message. The deadline, the fallback and the circuit are those
    of :class:`~redis_ratelimit.RateLimiter`; a call past its deadline is
    cancelled, its connection closed, and nothing of it is sent again.
    """

    def __init__(
        self,
        client: AsyncClient,
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
    ) -> AsyncRateLimiter:
        """A limiter on a client of its own (see :meth:`RateLimiter.from_url`)."""
        settings = {**client_options(deadline, asyncio=True), "retry": no_retry(), **options}
        client = redis.asyncio.from_url(url, **settings)
        return cls(
            client,
            deadline=deadline,
            fallback=fallback,
            degraded_share=degraded_share,
            probe_interval=probe_interval,
            deny_cache=deny_cache,
            leases=leases,
        )

    async def _send(self, args: Sequence[Any], seconds: float, land: Land | None = None) -> Any:
        """One command, answered within ``seconds`` or given up.

        A call given up (past its deadline, or its caller cancelled) before
        its command was written is cancelled: nothing of it is sent. One
        given up after lands in the background: its reply is awaited there
        and ``land`` (from that reply) gives back what it took. Through
        another client than a plain ``redis.asyncio.Redis`` (a cluster) a
        call given up is cancelled and its connection closed.
        """
        client = self.client
        flight = Flight()
        if isinstance(client, redis.asyncio.Redis) and client.connection is None:
            call = asyncio.ensure_future(round_trip(client.connection_pool, args, flight))
        else:
            call = asyncio.ensure_future(client.execute_command(*args))
        try:
            done, _ = await asyncio.wait((call,), timeout=max(seconds, 0.001))
        except BaseException:
            self._give_up(call, flight, land, seconds)
            raise
        if not done:
            self._give_up(call, flight, land, seconds)
            raise TimeoutError(f"no reply within {seconds:.3f} s")
        try:
            return call.result()
        except redis.exceptions.ResponseError as e:
            raise server_error(e) from None

    def _give_up(
        self, call: asyncio.Future[Any], flight: Flight, land: Land | None, seconds: float
    ) -> None:
        client = self.client
        if not flight.sent or not isinstance(client, redis.asyncio.Redis):
            _abandon(call)
            return
        call.add_done_callback(_dropped)
        pool = client.connection_pool
        self.landings.later(
            call, flight, pool, land, 2 * ORPHAN_WAIT + seconds, self.guard.circuit.succeeded
        )

    async def _run(self, args: Sequence[Any]) -> Any:
        return await self._send(args, self.guard.deadline)

    async def _decide(
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
            reply = await self._guarded(args, seconds, lander(parse, undo))
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

    async def _guarded(self, args: Sequence[Any], seconds: float, land: Land | None = None) -> Any:
        """One command through the circuit within ``seconds``; ``Unavailable`` on an outage."""
        circuit = self.guard.circuit
        step = circuit.step()
        if step == "skip":
            raise Unavailable("Redis is unavailable (the circuit is open)")
        start = time.monotonic()
        try:
            if step == "probe":
                await self._send(("PING",), seconds)
            reply = await self._send(args, seconds - (time.monotonic() - start), land)
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

    async def decide(
        self, key: str | bytes, policy: Policy, **options: Unpack[Options]
    ) -> Decision:
        """Decides one request on ``key`` under ``policy`` with its single-key command.

        With ``leases`` and a key they lease, it is answered from the key's block.
        """
        self._follow()
        if self.leases is not None and self.leases.applies(key, policy, options):
            return await _leased.adecide(self, self.leases, key, policy, options)
        args, partial = _commands.decide(key, policy, options)
        return await self._decide(
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

    async def refund_leases(self, idle: float | None = None) -> int:
        """Gives back with ``REFUND`` the units of the leases unused for ``idle`` seconds.

        ``None``: every lease's (at shutdown). Returns the units refunded.
        """
        leases = self.leases
        if leases is None:
            return 0
        if idle is None:  # the blocks still coming land first (each within its own bound)
            out = leases.calls_out()
            if out:
                await asyncio.wait([asyncio.shield(c) for c in out])
        taken = leases.all_units() if idle is None else leases.idle(idle, time.monotonic())
        return await _leased.arefund(self, leases, taken)

    async def refresh_hot_keys(self) -> frozenset[bytes]:
        """One poll of ``RL.HOTKEYS``: the keys leased as hot now (their first 64 bytes).

        A key no longer hot has its units refunded and is decided per request again.
        """
        if self.leases is None or not self.leases.hot:
            raise ValueError("the limiter has no Leases(hot=True)")
        return await _leased.arefresh(self, self.leases)

    def follow_hot_keys(self, every: float = HOT_POLL) -> asyncio.Task[None]:
        """A task polling the hot keys every ``every`` seconds (cancel it to stop)."""
        return asyncio.ensure_future(_leased.afollow(self.refresh_hot_keys, every))

    async def reserve(
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

        decision = await self._decide(
            args, [(key, policy)], options, parse, undo=undo_decide(key, policy, options)
        )
        return reservation(decision, delay[0] if delay else None)

    async def gcra(
        self,
        key: str | bytes,
        limit: int,
        period: Duration,
        *,
        burst: int | None = None,
        **options: Unpack[Options],
    ) -> Decision:
        """``RL.GCRA``: a sustained ``limit`` per ``period``, bursts of ``burst``."""
        return await self.decide(key, Policy.gcra(limit, period, burst=burst), **options)

    async def bucket(
        self,
        key: str | bytes,
        capacity: int,
        refill: int,
        period: Duration,
        **options: Unpack[Options],
    ) -> Decision:
        """``RL.BUCKET``: ``capacity`` tokens, ``refill`` more per ``period``."""
        return await self.decide(key, Policy.bucket(capacity, refill, period), **options)

    async def sliding(
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
        return await self.decide(key, policy, **options)

    async def fixed(
        self,
        key: str | bytes,
        limit: int,
        window: Duration,
        *,
        aligned: bool = False,
        **options: Unpack[Options],
    ) -> Decision:
        """``RL.FIXED``: ``limit`` per window, from the first request or ``aligned``."""
        return await self.decide(key, Policy.fixed(limit, window, aligned=aligned), **options)

    async def sketch(
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
        return await self._decide(args, limits, options, lambda r: parse_decision(r, None, False))

    async def all(
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
        return await self._decide(
            args,
            limits,
            options,
            lambda r: parse_all(r, policies, partial),
            slot,
            undo=undo_all(limits, costs, options) if refund_costs is None else None,
        )

    async def share(
        self, path: Sequence[tuple[str | bytes, Node]], **options: Unpack[Options]
    ) -> Decision:
        """``RL.SHARE``: limits along a path, leaf first, lending unused capacity."""
        args = _commands.share("RL.SHARE", path, options)
        limits = _commands.share_limits(path)
        nothing = [None] * len(path)
        return await self._decide(args, limits, options, lambda r: parse_all(r, nothing, False))

    async def share_peek(self, path: Sequence[tuple[str | bytes, Node]]) -> Decision:
        """``RL.SHARE.PEEK``: what one unit at the leaf would get now, changing nothing."""
        args = _commands.share("RL.SHARE.PEEK", path, None)
        return parse_all(await self._run(args), [None] * len(path), False)

    async def check(
        self, key: str | bytes, name: str, *fallbacks: str, **options: Unpack[Options]
    ) -> Decision:
        """``RL.CHECK``: decides under the first defined of the named policies."""
        return await self.decide(key, Policy.named(name, *fallbacks), **options)

    async def peek(self, key: str | bytes, policy: Policy) -> Decision:
        """``RL.PEEK``: a look at a limiter that changes nothing."""
        return parse_decision(await self._run(("RL.PEEK", key, *policy.words)), policy, False)

    async def acquire(
        self, key: str | bytes, limit: int, ttl: Duration, **options: Unpack[Options]
    ) -> Decision:
        """``RL.ACQUIRE``: a lease of ``cost`` units of ``limit``, ending after ``ttl``."""
        return await self.decide(key, Policy.concurrency(limit, ttl), **options)

    async def release(self, key: str | bytes, lease: str) -> bool:
        """``RL.RELEASE``: true if the lease was held (not expired, not released)."""
        return bool(await self._run(("RL.RELEASE", key, lease)))

    async def renew(self, key: str | bytes, lease: str, ttl: Duration) -> bool:
        """``RL.RENEW``: the lease now ends ``ttl`` from now; false if it had ended."""
        return bool(await self._run(("RL.RENEW", key, lease, duration_word(ttl))))

    async def throttle(
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
        return await self._decide((*limit, quantity), limits, options, parse_throttle, undo=undo)

    async def clock(self) -> int:
        """``RL.CLOCK``: the limiter's time, microseconds since the epoch."""
        return int(await self._run(("RL.CLOCK",)))

    async def set_clock(self, us: int) -> int:
        """``RL.CLOCK SET``: sets a manual clock (module loaded with ``clock manual``)."""
        return int(await self._run(("RL.CLOCK", "SET", us)))

    async def advance_clock(self, by: Duration | int) -> int:
        """``RL.CLOCK ADVANCE``: moves a manual clock by ``by`` (an int is microseconds)."""
        us = by if isinstance(by, int) else duration_ms(by) * 1000
        return int(await self._run(("RL.CLOCK", "ADVANCE", us)))

    def lease(
        self,
        key: str | bytes,
        limit: int,
        ttl: Duration,
        *,
        renew_every: Duration | None = None,
        **options: Unpack[Options],
    ) -> AsyncLease:
        """A concurrency lease as a context manager: held in the body, released on exit.

        While the body runs a task renews it every ``renew_every`` (a
        third of ``ttl`` by default). Entering raises
        :class:`~redis_ratelimit.LimitExceeded` when it is denied (with
        ``wait=``, after waiting up to that long on the server).
        """
        return AsyncLease(self, key, limit, ttl, renew_every, options)


def no_retry() -> redis.asyncio.retry.Retry:
    """redis-py's retry that does not: the deadline is the limiter's."""
    return redis.asyncio.retry.Retry(redis.backoff.NoBackoff(), 0)


# Tasks that finish a lease whose holder was cancelled (a release), kept
# referenced until done.
_background: set[asyncio.Future[Any]] = set()


def _in_background(task: asyncio.Future[Any]) -> asyncio.Future[Any]:
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


def _abandon(call: asyncio.Future[Any]) -> None:
    """Cancels a call given up and lets it finish on its own, its outcome read and dropped."""
    call.cancel()
    call.add_done_callback(_dropped)
    _in_background(call)


def _dropped(call: asyncio.Future[Any]) -> None:
    if not call.cancelled():
        call.exception()  # read, so that asyncio does not report it


class AsyncLease:
    """A held concurrency lease (see :meth:`AsyncRateLimiter.lease`).

    Cancellation-safe: a task cancelled while acquiring lets the acquire
    finish in the background and releases what it got; one cancelled in the
    body (or while releasing) still releases, shielded from the
    cancellation, which then goes on.
    """

    def __init__(
        self,
        limiter: AsyncRateLimiter,
        key: str | bytes,
        limit: int,
        ttl: Duration,
        renew_every: Duration | None,
        options: Options,
    ) -> None:
        """A lease to take on entry; use :meth:`AsyncRateLimiter.lease`."""
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
        self._renewer: asyncio.Task[None] | None = None

    @property
    def id(self) -> str:
        """The lease's id, as RL.ACQUIRE returned it."""
        if self.decision is None or self.decision.lease is None:
            raise RuntimeError("the lease is not held")
        return self.decision.lease

    async def __aenter__(self) -> AsyncLease:
        """Acquires the lease and starts renewing it."""
        acquiring = asyncio.ensure_future(
            self.limiter.decide(self.key, self.policy, **self.options)
        )
        try:
            decision = await asyncio.shield(acquiring)
        except asyncio.CancelledError:
            acquiring.add_done_callback(self._release_orphan)
            raise
        if not decision.allowed or decision.lease is None:
            raise LimitExceeded(decision)
        self.decision = decision
        self._renewer = asyncio.create_task(self._renew())
        return self

    def _release_orphan(self, acquiring: asyncio.Future[Decision]) -> None:
        """Releases what an acquire whose caller was cancelled got."""
        if acquiring.cancelled() or acquiring.exception() is not None:
            return
        lease = acquiring.result().lease
        if lease is not None:
            _in_background(asyncio.ensure_future(self._release(lease)))

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                held = await self.limiter.renew(self.key, self.id, self.ttl)
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                continue  # the server may come back before the TTL passes
            except CommandError:
                held = False  # e.g. the key was replaced: the lease is gone
            if not held:
                self.lost = True
                return
            self.renewals += 1

    async def _release(self, lease: str) -> None:
        with contextlib.suppress(redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            await self.limiter.release(self.key, lease)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stops renewing and releases the lease, even when cancelled."""
        if self._renewer is not None:
            self._renewer.cancel()  # a renewal in flight after the release finds nothing
        releasing = _in_background(asyncio.ensure_future(self._release(self.id)))
        await asyncio.shield(releasing)
