"""Panels for commands a server may or may not have: the one place to add one.

At each (re)connection the poller asks the server which ``rl.*`` commands it
has (``COMMAND LIST FILTERBY PATTERN rl.*``, one command). A feature whose
command is missing is shown as "not offered by this server"; one that is
present adds its command to each tick's pipeline, and the page shows its
reply as a table (``rows``). To add a panel: append a ``Feature``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def rows(reply: Any) -> list[list[str]]:
    """Any reply as table rows: a map's entries, an array's elements, a value alone."""
    if isinstance(reply, dict):
        return [[str(k), str(v)] for k, v in reply.items()]
    if isinstance(reply, list | tuple):
        return [[str(c) for c in r] if isinstance(r, list | tuple) else [str(r)] for r in reply]
    return [[str(reply)]]


def page(reply: Any) -> list[list[str]]:
    """A SCAN-like ``[cursor, [row, ...]]`` reply: its first page's rows."""
    return rows(reply[1]) if isinstance(reply, list | tuple) and len(reply) == 2 else rows(reply)


@dataclass(frozen=True)
class Feature:
    """An optional panel: its title, the command it sends (read-only) and how to show it."""

    name: str
    title: str
    command: tuple[str, ...]
    check: str
    """The name ``COMMAND LIST`` gives when the server has it (``rl.x`` or ``rl.x|sub``)."""
    parse: Callable[[Any], list[list[str]]] = rows


FEATURES: tuple[Feature, ...] = (
    Feature(
        "hot_keys", "Hot keys (key, decisions per second, error)", ("RL.HOTKEYS",), "rl.hotkeys"
    ),
    Feature(
        "deny_list",
        "Deny-listed keys (key, ms left, reason)",
        ("RL.DENYLIST", "0", "COUNT", "20"),
        "rl.denylist",
        page,
    ),
    Feature(
        "penalized",
        "Penalty-boxed keys (key, ms left, form), the latest block first",
        ("RL.PENALIZED", "COUNT", "20"),
        "rl.penalized",
    ),
)
"""Each read-only; a server without the command shows "not offered by this server"."""
