"""Errors: the server's own message, and a denial where a call cannot go on."""

from __future__ import annotations

from typing import TYPE_CHECKING

import redis.exceptions

if TYPE_CHECKING:
    from .decision import Decision


class RateLimitError(Exception):
    """The base of every error this package raises itself."""


class CommandError(RateLimitError, redis.exceptions.ResponseError):
    """The server refused a command: bad arguments, a key of another kind.

    ``str(error)`` is the server's message as it sent it, prefix included
    (``ERR limit must be an integer from 1 to 9223372036854775807``); it is
    also a :class:`redis.exceptions.ResponseError`, so existing handlers
    keep working.
    """

    code: str
    """The error's prefix: ``ERR``, ``WRONGTYPE``, ``OOM``, ``NOPERM``, ..."""

    def __init__(self, message: str) -> None:
        """An error for the server's full ``message``."""
        super().__init__(message)
        self.code = message.split(" ", 1)[0]
        self.status_code = self.code

    @property
    def message(self) -> str:
        """The server's message, prefix included."""
        return str(self.args[0])

    def __repr__(self) -> str:
        """The class and the server's message (redis-py's errors say only ``server:Class``)."""
        return f"{type(self).__name__}({self.message!r})"


class WrongTypeError(CommandError):
    """The key holds another type, or another limiter's state (``WRONGTYPE``)."""


class Unavailable(RateLimitError, redis.exceptions.ConnectionError):
    """Redis did not answer by the deadline, or the connection is known down.

    Raised by decisions whose fallback is ``"raise"`` (the default), at
    once while the circuit is open; a :class:`redis.exceptions.ConnectionError`,
    so existing handlers keep working.
    """


class LimitExceeded(RateLimitError):
    """A lease or a block of work was denied: the decision says how long to wait."""

    decision: Decision
    """The denial, with ``retry_after``."""

    def __init__(self, decision: Decision) -> None:
        """An error carrying the denying ``decision``."""
        super().__init__(f"rate limit exceeded; retry after {decision.retry_after}")
        self.decision = decision


# redis-py strips `ERR ` and these prefixes from the messages it raises (each
# its own class) and leaves other codes in place: of those, these can reach
# a rate-limit command.
_KEPT = ("WRONGTYPE ", "CROSSSLOT ", "BUSY ", "MISCONF ", "NOREPLICAS ", "MASTERDOWN ", "TRYAGAIN ")
_STRIPPED = {
    redis.exceptions.OutOfMemoryError: "OOM",
    redis.exceptions.NoPermissionError: "NOPERM",
    redis.exceptions.ReadOnlyError: "READONLY",
}


def server_error(error: redis.exceptions.ResponseError) -> CommandError:
    """The package's error for a server error reply, its message as sent."""
    text = str(error)
    prefix: str | None = getattr(error, "status_code", None)  # redis-py 8 keeps it
    if prefix is None:
        prefix = next((p for cls, p in _STRIPPED.items() if isinstance(error, cls)), None)
    if prefix is None and not text.startswith(_KEPT):
        prefix = "ERR"
    message = f"{prefix} {text}" if prefix else text
    if message.startswith("WRONGTYPE"):
        return WrongTypeError(message)
    return CommandError(message)
