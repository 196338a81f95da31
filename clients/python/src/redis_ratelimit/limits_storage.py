r"""A ``limits`` storage on the module: Flask-Limiter and slowapi by a storage URI.

Importing this module registers ``redis+ratelimit://`` (also
``rediss+ratelimit://`` and ``redis+ratelimit+unix://``) and
``async+redis+ratelimit://`` with ``limits``::

    import redis_ratelimit.limits_storage  # noqa: F401
    limiter = Limiter(get_remote_address, app=app, storage_uri="redis+ratelimit://localhost:6379")

Each hit is one module command, decided atomically on the server with the
server's clock: the fixed window ``RL.FIXED`` (as a counter, so that a hit
over the limit still counts, as ``limits`` expects), the moving window
``RL.SLIDING ... EXACT`` and the sliding window counter ``RL.SLIDING ...
APPROX``. The reads behind ``test`` and ``get_window_stats`` are
``RL.PEEK``\\ s, which change nothing.

Every command waits at most ``deadline`` seconds (a storage option,
:data:`~redis_ratelimit.DEFAULT_DEADLINE` by default). An outage raises
:class:`~redis_ratelimit.Unavailable` (a ``redis.ConnectionError``), at once
while the connection is known down; Flask-Limiter and slowapi then apply
their own fallback (``swallow_errors``, ``in_memory_fallback_enabled``).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

import redis
import redis.asyncio
import redis.exceptions
from limits.aio.storage import MovingWindowSupport as AsyncMovingWindowSupport
from limits.aio.storage import SlidingWindowCounterSupport as AsyncSlidingWindowCounterSupport
from limits.aio.storage import Storage as AsyncStorage
from limits.limits import TIME_TYPES
from limits.storage import MovingWindowSupport, SlidingWindowCounterSupport, Storage
from limits.storage.base import TimestampedSlidingWindow

from ._guard import DEFAULT_DEADLINE, PROBE_INTERVAL, client_options
from ._landing import Land
from .aio import AsyncRateLimiter
from .aio import no_retry as async_no_retry
from .client import RateLimiter, no_retry
from .decision import Decision, parse_decision

COUNTER = 9223372036854775807
"""The fixed window's limit: the largest count, so that RL.FIXED counts every hit."""
FOREVER = "36500d"
"""A window for keys whose window cannot be read from the key (it expires at its own end)."""
PREFIX = "LIMITS:RL"
"""The default key prefix: not that of ``limits``' Redis storage (``LIMITS``),
whose plain integers this storage's commands would refuse (``WRONGTYPE``)."""

_SECONDS = {t.name: t.seconds for t in TIME_TYPES.values()}


def redis_url(uri: str) -> str:
    """The redis-py URL for a storage URI (``redis+ratelimit://h:p/0`` is ``redis://h:p/0``)."""
    scheme, rest = uri.split("://", 1)
    scheme = scheme.removeprefix("async+")
    base = {
        "redis+ratelimit": "redis",
        "rediss+ratelimit": "rediss",
        "redis+ratelimit+unix": "unix",
    }.get(scheme)
    if base is None:
        raise ValueError(f"not a redis+ratelimit storage URI: {uri}")
    return f"{base}://{rest}"


def window_of(key: str) -> str:
    """The window of a ``limits`` key (``.../10/2/minute`` is 120 s), else :data:`FOREVER`."""
    parts = key.rsplit("/", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2] in _SECONDS:
        return f"{int(parts[1]) * _SECONDS[parts[2]]}s"
    return FOREVER


def seconds(expiry: float) -> str:
    """An expiry in seconds as the module's word (whole seconds, else milliseconds)."""
    if float(expiry).is_integer():
        return f"{int(expiry)}s"
    return f"{round(expiry * 1000)}ms"


TOLD = 10_000
"""The most keys whose jittered wait the storage remembers (the least recently told give way)."""


class _Commands:
    """The storage's commands and how their replies read, for both storages.

    With ``jitter``, a moving-window or sliding-window-counter hit sends
    ``JITTER``: a denied hit's wait is the server's spread one, remembered
    for the key until it passes, and the window ``limits`` reads next (its
    ``reset_time``, so Flask-Limiter's ``Retry-After``) ends no sooner.
    """

    key_prefix: str
    jitter: bool = False
    _told: OrderedDict[str, float]

    def told(self, key: str, now: float) -> float | None:
        """The UNIX time until which a jittered denial of ``key`` said to wait, if to come."""
        until = self._told.get(key) if self.jitter else None
        return until if until is not None and until > now else None

    def hit(self, key: str, reply: Any) -> bool:
        """Whether a hit was admitted; a jittered denial's wait is remembered."""
        d = _decision(reply)
        if self.jitter:
            if d.allowed or d.retry_after is None:
                self._told.pop(key, None)
            else:
                self._told[key] = time.time() + d.retry_after.total_seconds()
                self._told.move_to_end(key)
                if len(self._told) > TOLD:
                    self._told.popitem(last=False)
        return d.allowed

    def _jitter(self) -> tuple[str, ...]:
        return ("JITTER",) if self.jitter else ()

    def prefixed(self, key: str) -> str:
        return f"{self.key_prefix}:{key}"

    def incr_args(self, key: str, expiry: float, amount: int) -> tuple[Any, ...]:
        return ("RL.FIXED", self.prefixed(key), COUNTER, seconds(expiry), "COST", amount)

    def get_args(self, key: str) -> tuple[Any, ...]:
        return ("RL.PEEK", self.prefixed(key), "FIXED", COUNTER, window_of(key))

    def moving_args(self, key: str, limit: int, expiry: float) -> tuple[Any, ...]:
        return ("RL.PEEK", self.prefixed(key), "SLIDING", limit, seconds(expiry), "EXACT")

    def acquire_args(self, key: str, limit: int, expiry: float, amount: int) -> tuple[Any, ...]:
        return (
            "RL.SLIDING",
            self.prefixed(key),
            limit,
            seconds(expiry),
            "EXACT",
            "COST",
            amount,
            *self._jitter(),
        )

    def sliding_args(self, key: str, limit: int, expiry: float) -> tuple[Any, ...]:
        return ("RL.PEEK", self.prefixed(key), "SLIDING", limit, seconds(expiry), "APPROX")

    def acquire_sliding_args(
        self, key: str, limit: int, expiry: float, amount: int
    ) -> tuple[Any, ...]:
        return (
            "RL.SLIDING",
            self.prefixed(key),
            limit,
            seconds(expiry),
            "APPROX",
            "COST",
            amount,
            *self._jitter(),
        )


def undo(args: tuple[Any, ...]) -> Land:
    """A hit cut short after it was sent gives back what its late reply says it took."""
    at = args.index("COST")
    base, amount = args[:at], args[at + 1]

    def land(reply: Any) -> tuple[Any, ...] | None:
        try:
            return (*base, "REFUND", amount) if _decision(reply).allowed else None
        except Exception:  # an error took nothing
            return None

    return land


def _decision(reply: Any) -> Decision:
    return parse_decision(reply, None, False)


Window = tuple[int, float, int, float]
"""``get_sliding_window``'s reply: previous count and TTL, current count and TTL."""


def weighted_count(reply: Any) -> tuple[int, float]:
    """The weighted count (rounded up) and ``reset_after`` from an RL.PEEK at the largest limit."""
    d = _decision(reply)
    return COUNTER - d.remaining, d.reset_after.total_seconds()


def limit_of(key: str) -> int | None:
    """The limit of a ``limits`` key (``.../10/2/minute`` is 10), else ``None``."""
    parts = key.rsplit("/", 3)
    if len(parts) == 4 and parts[1].isdigit() and window_of(key) != FOREVER:
        return int(parts[1])
    return None


def look_at(key: str, count: int) -> tuple[int, bool]:
    """The limit at which a second RL.PEEK tells the reset, and whether the key is full."""
    limit = limit_of(key)
    if limit is not None and count >= limit:
        return limit, True
    return count, False


def sliding_window(
    count: int, reset: float, reply: Any, expiry: float, full: bool, told: float | None = None
) -> Window:
    """``get_sliding_window``'s tuple, given the weighted ``count`` and a look at the reset.

    ``reply`` (an RL.PEEK at the limit of :func:`look_at`) says when a unit
    frees: for a full key, when a hit is admitted again (what
    ``Retry-After`` tells); for another key the reset is, as for ``limits``'
    own storages, the earlier of that and the end of the current window
    (``reset_after`` past a window, when the current window has a count).
    ``limits`` weighs the tuple to ``count`` plus less than one (its
    ``remaining`` is the module's) and reads the reset from the previous
    window's TTL: at most just under a window, so a wait of a whole window
    or more (hits in a window's first moments) is told as just under one.
    ``told``: a jittered denial's wait (seconds from now), never shortened.
    """
    wait = _seconds(_decision(reply))
    if told is not None:
        wait = max(wait, told)
    if not full and reset > expiry:
        wait = min(wait, reset - expiry)
    below = expiry - 0.001  # a millisecond: expiry + below must stay under two windows
    return 1, expiry + min(wait, below), count - 1, below


def _seconds(d: Decision) -> float:
    wait = d.retry_after if d.retry_after is not None else d.reset_after
    return wait.total_seconds()


class RateLimitStorage(
    _Commands, Storage, MovingWindowSupport, SlidingWindowCounterSupport, TimestampedSlidingWindow
):
    """The ``limits`` storage for ``redis+ratelimit://`` URIs (blocking redis-py).

    ``uri`` is a Redis URL with ``+ratelimit`` after its scheme; ``options``
    go to :func:`redis.from_url` after :func:`~redis_ratelimit.client_options`
    (no retry, timeouts of ``deadline``, RESP2). ``client`` uses a client of
    your own instead (give it those options: see the README).
    """

    STORAGE_SCHEME = [  # noqa: RUF012 - limits declares it a plain list
        "redis+ratelimit",
        "rediss+ratelimit",
        "redis+ratelimit+unix",
    ]
    """The URI schemes this storage is registered under."""

    def __init__(
        self,
        uri: str = "redis+ratelimit://localhost:6379",
        *,
        key_prefix: str = PREFIX,
        wrap_exceptions: bool = False,
        client: redis.Redis | None = None,
        deadline: float | str = DEFAULT_DEADLINE,
        probe_interval: float | str = PROBE_INTERVAL,
        jitter: bool | str = False,
        **options: Any,
    ) -> None:
        """A storage on the server at ``uri``, its keys under ``key_prefix``.

        ``deadline`` and ``probe_interval`` are seconds (a string, as
        ``storage_options`` may give them, is read as a number);
        ``jitter`` (``True`` or ``"true"``) spreads denied hits' waits.
        """
        super().__init__(uri, wrap_exceptions=wrap_exceptions)
        deadline, probe_interval = float(deadline), float(probe_interval)
        self.key_prefix = key_prefix
        self.jitter = jitter is True or str(jitter).lower() in ("true", "1", "yes")
        self._told = OrderedDict()
        if client is None:
            settings = {**client_options(deadline), "retry": no_retry(), **options}
            client = redis.from_url(redis_url(uri), **settings)
        self.storage = client
        self.limiter = RateLimiter(client, deadline=deadline, probe_interval=probe_interval)

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        """redis-py's errors, which ``wrap_exceptions`` turns into ``StorageError``."""
        return redis.exceptions.RedisError

    def _run(self, args: tuple[Any, ...], land: Land | None = None) -> Any:
        return self.limiter._guarded(args, self.limiter.guard.deadline, land)

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Counts ``amount`` in the key's fixed window of ``expiry`` seconds: one RL.FIXED."""
        args = self.incr_args(key, expiry, amount)
        return COUNTER - _decision(self._run(args, undo(args))).remaining

    def get(self, key: str) -> int:
        """The count in the key's current fixed window (RL.PEEK)."""
        return COUNTER - _decision(self._run(self.get_args(key))).remaining

    def get_expiry(self, key: str) -> float:
        """When the key's fixed window ends, as a UNIX time."""
        window = window_of(key)
        if window == FOREVER:
            ttl = int(self._run(("PTTL", self.prefixed(key))))
            return time.time() + max(ttl, 0) / 1000
        d = _decision(self._run(("RL.PEEK", self.prefixed(key), "FIXED", COUNTER, window)))
        return time.time() + d.reset_after.total_seconds()

    def check(self) -> bool:
        """Whether the server answers."""
        try:
            return bool(self.storage.ping())
        except redis.exceptions.RedisError:
            return False

    def reset(self) -> int | None:
        """Deletes every key under the prefix (SCAN and UNLINK, 1,000 at a time)."""
        deleted = 0
        batch: list[Any] = []
        for key in self.storage.scan_iter(match=self.prefixed("*"), count=1000):
            batch.append(key)
            if len(batch) == 1000:
                deleted += int(self.storage.unlink(*batch))
                batch.clear()
        if batch:
            deleted += int(self.storage.unlink(*batch))
        return deleted

    def clear(self, key: str) -> None:
        """Resets one limit (DEL)."""
        self.storage.delete(self.prefixed(key))

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """A moving-window hit: one RL.SLIDING ... EXACT."""
        args = self.acquire_args(key, limit, expiry, amount)
        return self.hit(key, self._run(args, undo(args)))

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """The moving window's start (its oldest entry's time) and its entries."""
        now = time.time()
        count = limit - _decision(self._run(self.moving_args(key, limit, expiry))).remaining
        if count <= 0:
            return now, 0
        oldest = _decision(self._run(self.moving_args(key, count, expiry)))
        start = now + _seconds(oldest) - expiry
        told = self.told(key, now)
        return (start if told is None else max(start, told - expiry)), count

    def acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: int, amount: int = 1
    ) -> bool:
        """A sliding-window-counter hit: one RL.SLIDING ... APPROX."""
        args = self.acquire_sliding_args(key, limit, expiry, amount)
        return self.hit(key, self._run(args, undo(args)))

    def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        """The window as ``limits`` reads it, from one or two RL.PEEKs (:func:`sliding_window`)."""
        count, reset = weighted_count(self._run(self.sliding_args(key, COUNTER, expiry)))
        if count <= 0:
            return 0, 0.0, 0, 0.0
        limit, full = look_at(key, count)
        reply = self._run(self.sliding_args(key, limit, expiry))
        now = time.time()
        told = self.told(key, now)
        return sliding_window(
            count, reset, reply, expiry, full, None if told is None else told - now
        )

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        """Resets one sliding-window-counter limit (DEL)."""
        self.clear(key)


class AsyncRateLimitStorage(
    _Commands,
    AsyncStorage,
    AsyncMovingWindowSupport,
    AsyncSlidingWindowCounterSupport,
    TimestampedSlidingWindow,
):
    """The ``limits`` storage for ``async+redis+ratelimit://`` URIs (redis-py asyncio)."""

    STORAGE_SCHEME = [  # noqa: RUF012 - limits declares it a plain list
        "async+redis+ratelimit",
        "async+rediss+ratelimit",
        "async+redis+ratelimit+unix",
    ]
    """The URI schemes this storage is registered under."""

    def __init__(
        self,
        uri: str = "async+redis+ratelimit://localhost:6379",
        *,
        key_prefix: str = PREFIX,
        wrap_exceptions: bool = False,
        client: redis.asyncio.Redis | None = None,
        deadline: float | str = DEFAULT_DEADLINE,
        probe_interval: float | str = PROBE_INTERVAL,
        jitter: bool | str = False,
        **options: Any,
    ) -> None:
        """A storage on the server at ``uri``, its keys under ``key_prefix``.

        ``deadline`` and ``probe_interval`` are seconds (a string, as
        ``storage_options`` may give them, is read as a number);
        ``jitter`` (``True`` or ``"true"``) spreads denied hits' waits.
        """
        super().__init__(uri, wrap_exceptions=wrap_exceptions)
        deadline, probe_interval = float(deadline), float(probe_interval)
        self.key_prefix = key_prefix
        self.jitter = jitter is True or str(jitter).lower() in ("true", "1", "yes")
        self._told = OrderedDict()
        if client is None:
            settings = {
                **client_options(deadline, asyncio=True),
                "retry": async_no_retry(),
                **options,
            }
            client = redis.asyncio.from_url(redis_url(uri), **settings)
        self.storage = client
        self.limiter = AsyncRateLimiter(client, deadline=deadline, probe_interval=probe_interval)

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        """redis-py's errors, which ``wrap_exceptions`` turns into ``StorageError``."""
        return redis.exceptions.RedisError

    async def _run(self, args: tuple[Any, ...], land: Land | None = None) -> Any:
        return await self.limiter._guarded(args, self.limiter.guard.deadline, land)

    async def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Counts ``amount`` in the key's fixed window of ``expiry`` seconds: one RL.FIXED."""
        args = self.incr_args(key, expiry, amount)
        return COUNTER - _decision(await self._run(args, undo(args))).remaining

    async def get(self, key: str) -> int:
        """The count in the key's current fixed window (RL.PEEK)."""
        return COUNTER - _decision(await self._run(self.get_args(key))).remaining

    async def get_expiry(self, key: str) -> float:
        """When the key's fixed window ends, as a UNIX time."""
        window = window_of(key)
        if window == FOREVER:
            ttl = int(await self._run(("PTTL", self.prefixed(key))))
            return time.time() + max(ttl, 0) / 1000
        args = ("RL.PEEK", self.prefixed(key), "FIXED", COUNTER, window)
        d = _decision(await self._run(args))
        return time.time() + d.reset_after.total_seconds()

    async def check(self) -> bool:
        """Whether the server answers."""
        try:
            return bool(await self.storage.ping())
        except redis.exceptions.RedisError:
            return False

    async def reset(self) -> int | None:
        """Deletes every key under the prefix (SCAN and UNLINK, 1,000 at a time)."""
        deleted = 0
        batch: list[Any] = []
        async for key in self.storage.scan_iter(match=self.prefixed("*"), count=1000):
            batch.append(key)
            if len(batch) == 1000:
                deleted += int(await self.storage.unlink(*batch))
                batch.clear()
        if batch:
            deleted += int(await self.storage.unlink(*batch))
        return deleted

    async def clear(self, key: str) -> None:
        """Resets one limit (DEL)."""
        await self.storage.delete(self.prefixed(key))

    async def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """A moving-window hit: one RL.SLIDING ... EXACT."""
        args = self.acquire_args(key, limit, expiry, amount)
        return self.hit(key, await self._run(args, undo(args)))

    async def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """The moving window's start (its oldest entry's time) and its entries."""
        now = time.time()
        count = limit - _decision(await self._run(self.moving_args(key, limit, expiry))).remaining
        if count <= 0:
            return now, 0
        oldest = _decision(await self._run(self.moving_args(key, count, expiry)))
        start = now + _seconds(oldest) - expiry
        told = self.told(key, now)
        return (start if told is None else max(start, told - expiry)), count

    async def acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: int, amount: int = 1
    ) -> bool:
        """A sliding-window-counter hit: one RL.SLIDING ... APPROX."""
        args = self.acquire_sliding_args(key, limit, expiry, amount)
        return self.hit(key, await self._run(args, undo(args)))

    async def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        """The window as ``limits`` reads it, from one or two RL.PEEKs (:func:`sliding_window`)."""
        count, reset = weighted_count(await self._run(self.sliding_args(key, COUNTER, expiry)))
        if count <= 0:
            return 0, 0.0, 0, 0.0
        limit, full = look_at(key, count)
        reply = await self._run(self.sliding_args(key, limit, expiry))
        now = time.time()
        told = self.told(key, now)
        return sliding_window(
            count, reset, reply, expiry, full, None if told is None else told - now
        )

    async def clear_sliding_window(self, key: str, expiry: int) -> None:
        """Resets one sliding-window-counter limit (DEL)."""
        await self.clear(key)
