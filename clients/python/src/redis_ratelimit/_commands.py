"""Each command's arguments, built once for the sync and the asyncio client."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from .policy import Duration, Node, Policy, duration_word


class Options(TypedDict, total=False):
    """The options every decision command takes (the module checks how they combine).

    ``cost``: what the request takes (default 1). ``dryrun``: decide,
    change nothing. ``wait``: queue on the server up to this long instead
    of being denied. ``flow``/``weight``: share a key's admissions between
    waiting tenants by weight. ``force``: charge even what does not fit.
    ``partial``: charge as much of ``cost`` as fits. ``refund``: give units
    back. ``deadline``: seconds to wait for Redis on this call (the
    limiter's by default), besides ``wait``. ``jitter``: a denial's
    ``retry_after`` is spread over the time the key needs to admit the
    clients it denied together (never earlier than the true wait), so they
    do not all come back at once.
    """

    cost: int
    deadline: float
    dryrun: bool
    wait: Duration
    flow: str | bytes
    weight: int
    force: bool
    partial: bool
    refund: int
    jitter: bool


def add_options(args: list[Any], options: Options) -> bool:
    """Appends the options' words to ``args``; true with ``partial``."""
    if "cost" in options:
        args += ("COST", options["cost"])
    if options.get("dryrun"):
        args.append("DRYRUN")
    if "wait" in options:
        args += ("WAIT", duration_word(options["wait"]))
    # FLOW and WEIGHT go as given: the server names what is missing.
    if "flow" in options:
        args += ("FLOW", options["flow"])
    if "weight" in options:
        args += ("WEIGHT", options["weight"])
    if options.get("force"):
        args.append("FORCE")
    partial = bool(options.get("partial"))
    if partial:
        args.append("PARTIAL")
    if "refund" in options:
        args += ("REFUND", options["refund"])
    if options.get("jitter"):
        args.append("JITTER")
    return partial


def decide(key: str | bytes, policy: Policy, options: Options) -> tuple[list[Any], bool]:
    """The single-key command for ``policy`` on ``key``."""
    args: list[Any] = [policy.command, key, *policy.single]
    partial = add_options(args, options) if options else False
    return args, partial


def all_limits(
    limits: Sequence[tuple[str | bytes, Policy]],
    costs: Sequence[int] | None,
    refund_costs: Sequence[int] | None,
    options: Options,
) -> tuple[list[Any], bool]:
    """``RL.ALL numkeys key... policy...`` with its options."""
    args: list[Any] = ["RL.ALL", len(limits)]
    args += (key for key, _ in limits)
    for _, policy in limits:
        args += policy.words
    if costs is not None:
        args += ("COSTS", *costs)
    partial = add_options(args, options) if options else False
    if refund_costs is not None:
        args += ("REFUND", "COSTS", *refund_costs)
    return args, partial


def share(
    command: str, path: Sequence[tuple[str | bytes, Node]], options: Options | None
) -> list[Any]:
    """``RL.SHARE`` or ``RL.SHARE.PEEK`` over a path, leaf first."""
    args: list[Any] = [command, len(path)]
    args += (key for key, _ in path)
    for _, node in path:
        args += node.words()
    if options:
        add_options(args, options)
    return args


def sketch(
    key: str | bytes,
    item: str | bytes,
    limit: int,
    window: Duration,
    width: int | None,
    depth: int | None,
    cost: int | None,
    dryrun: bool,
) -> list[Any]:
    """``RL.SKETCH key item limit window ...``."""
    args: list[Any] = ["RL.SKETCH", key, item, limit, duration_word(window)]
    if width is not None:
        args += ("WIDTH", width)
    if depth is not None:
        args += ("DEPTH", depth)
    if cost is not None:
        args += ("COST", cost)
    if dryrun:
        args.append("DRYRUN")
    return args


def sketch_limits(
    key: str | bytes, item: str | bytes, limit: int, window: Duration
) -> list[tuple[str | bytes, Policy | None]]:
    """The limit a sketch's item is held to, for a local fallback: a fixed window."""
    name = (key.decode() if isinstance(key, bytes) else key) + ":"
    name += item.decode() if isinstance(item, bytes) else item
    return [(name, Policy.fixed(limit, window))]


def share_limits(
    path: Sequence[tuple[str | bytes, Node]],
) -> list[tuple[str | bytes, Policy | None]]:
    """The assured rates along a path, for a local fallback."""
    return [(key, Policy.gcra(n.limit, n.period)) for key, n in path]
