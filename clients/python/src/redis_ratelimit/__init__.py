"""Typed Python calls for the redis-ratelimit Redis module.

``RateLimiter`` (blocking) and ``AsyncRateLimiter`` (asyncio) wrap a
redis-py client; every decision comes back as a :class:`Decision`, the same
from RESP2 and RESP3. The ASGI middleware is in :mod:`redis_ratelimit.asgi`;
the ``limits`` storage (``redis+ratelimit://``) in
:mod:`redis_ratelimit.limits_storage`.
"""

from ._guard import DEFAULT_DEADLINE, PROBE_INTERVAL, Fallback, client_options
from ._landing import ORPHAN_WAIT
from .aio import AsyncLease, AsyncRateLimiter
from .client import Lease, RateLimiter
from .decision import Decision, Reservation
from .deny_cache import DenyCache
from .errors import CommandError, LimitExceeded, RateLimitError, Unavailable, WrongTypeError
from .leasing import Leases
from .policy import Duration, Node, Policy, Quota

__all__ = [
    "DEFAULT_DEADLINE",
    "ORPHAN_WAIT",
    "PROBE_INTERVAL",
    "AsyncLease",
    "AsyncRateLimiter",
    "CommandError",
    "Decision",
    "DenyCache",
    "Duration",
    "Fallback",
    "Lease",
    "Leases",
    "LimitExceeded",
    "Node",
    "Policy",
    "Quota",
    "RateLimitError",
    "RateLimiter",
    "Reservation",
    "Unavailable",
    "WrongTypeError",
    "client_options",
]
