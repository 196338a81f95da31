"""The conformance scenarios shared by every client (``conformance/scenarios.json``).

Each scenario runs through the typed API and its header fields against a
real server with the manual clock, on an empty database.
"""

from __future__ import annotations

import json
import signal
import time
from typing import Any

import pytest
import redis

from redis_ratelimit import Decision, DenyCache, Leases, Policy, RateLimiter, Unavailable
from redis_ratelimit.decision import parse_decision

from .conftest import REPO, Server

SCENARIOS: list[dict[str, Any]] = json.loads((REPO / "conformance" / "scenarios.json").read_text())[
    "scenarios"
]


def policy(words: str, name: str) -> Policy:
    """A policy from the module's words, through the typed constructors."""
    w = words.split()
    kind, rest = w[0].upper(), w[1:]
    if kind == "GCRA":
        burst = int(rest[3]) if len(rest) > 2 and rest[2].upper() == "BURST" else None
        return Policy.gcra(int(rest[0]), rest[1], burst=burst, name=name)
    if kind == "BUCKET":
        return Policy.bucket(int(rest[0]), int(rest[1]), rest[2], name=name)
    if kind == "FIXED":
        return Policy.fixed(int(rest[0]), rest[1], aligned=rest[2:] == ["ALIGNED"], name=name)
    if kind == "SLIDING":
        mode = rest[2].upper() if len(rest) > 2 else "EXACT"
        if mode == "BUCKETS":
            return Policy.sliding(int(rest[0]), rest[1], buckets=int(rest[3]), name=name)
        return Policy.sliding(
            int(rest[0]), rest[1], mode="approx" if mode == "APPROX" else "exact", name=name
        )
    raise ValueError(f"no typed constructor for {words!r}")


def throttle_args(what: dict[str, Any]) -> tuple[str, int, int, int, int]:
    """A ``throttle`` step's ``CL.THROTTLE`` arguments (``quantity`` default 1)."""
    q = int(what.get("quantity", 1))
    return what["key"], int(what["max_burst"]), int(what["count"]), int(what["period_s"]), q


def decide(limiter: RateLimiter, step: dict[str, Any]) -> Decision:
    deadline = step["deadline_ms"] / 1000 if "deadline_ms" in step else limiter.guard.deadline
    if "throttle" in step:
        return limiter.throttle(*throttle_args(step["throttle"]), deadline=deadline)
    limits = [(lim["key"], policy(lim["policy"], lim["name"])) for lim in step["decide"]]
    cost = int(step.get("cost", 1))
    if len(limits) == 1:
        key, p = limits[0]
        return limiter.decide(key, p, cost=cost, deadline=deadline)
    return limiter.all(limits, costs=[cost] * len(limits), deadline=deadline)


def run_step(limiter: RateLimiter, step: dict[str, Any]) -> list[str]:
    """One decide step: repeated ``times``, or until the server decides (``until_served_ms``)."""
    expect, out = step["expect"], []
    single = "throttle" in step or len(step["decide"]) == 1
    for _ in range(int(step.get("times", 1))):
        start = time.monotonic()
        until = start + step.get("until_served_ms", 0) / 1000
        while True:
            try:
                answer: Decision | Unavailable = decide(limiter, step)
            except Unavailable as e:
                answer = e
            served = not isinstance(answer, Unavailable) and answer.fallback is None
            if served or time.monotonic() >= until:
                break
            time.sleep(0.005)  # polling a state, bounded by until_served_ms
        took_ms = (time.monotonic() - start) * 1000
        if "within_ms" in expect and took_ms > expect["within_ms"]:
            out.append(f"answered after {took_ms:.1f} ms (expected within {expect['within_ms']})")
        if isinstance(answer, Unavailable):
            if not expect.get("unavailable"):
                out.append(f"unavailable: {answer}")
        elif expect.get("unavailable"):
            out.append("decided (expected: the store unavailable)")
        else:
            out += differences(answer, expect, single)
    return out


def differences(d: Decision, expect: dict[str, Any], single: bool) -> list[str]:
    out = []
    if "allowed" in expect and d.allowed != expect["allowed"]:
        out.append(f"allowed {d.allowed} (expected {expect['allowed']})")
    if "fallback" in expect and (d.fallback is not None) != expect["fallback"]:
        out.append(f"fallback {d.fallback!r} (expected {expect['fallback']})")
    if single and "remaining" in expect and d.remaining != expect["remaining"]:
        out.append(f"remaining {d.remaining} (expected {expect['remaining']})")
    if "retry_after_ms" in expect:
        got = None if d.retry_after is None else round(d.retry_after.total_seconds() * 1000)
        if got != expect["retry_after_ms"]:
            out.append(f"retry_after_ms {got} (expected {expect['retry_after_ms']})")
    if "retry_after_ms_between" in expect:
        lo, hi = expect["retry_after_ms_between"]
        got = None if d.retry_after is None else round(d.retry_after.total_seconds() * 1000)
        if got is None or not lo <= got <= hi:
            out.append(f"retry_after_ms {got} (expected from {lo} to {hi})")
    fields = {k.lower(): v for k, v in d.headers().items()}
    for name, value in expect.get("headers", {}).items():
        if fields.get(name.lower()) != value:
            out.append(f"header {name}: {fields.get(name.lower())!r} (expected {value!r})")
    if "violated" in expect and d.problem()["violated-policies"] != expect["violated"]:
        out.append(f"violated {d.problem()['violated-policies']} (expected {expect['violated']})")
    return out


def server_commands(c: redis.Redis) -> int:
    """``RL.*`` commands received since ``CONFIG RESETSTAT``, but ``RL.CLOCK`` and ``RL.PEEK``."""
    stats = c.info("commandstats")
    return sum(
        int(v["calls"])
        for k, v in stats.items()
        if k.startswith("cmdstat_rl.") and k not in ("cmdstat_rl.clock", "cmdstat_rl.peek")
    )


def peek(c: redis.Redis, step: dict[str, Any]) -> list[str]:
    """A ``peek`` step: the server's ``remaining``, read again until it matches (``within_ms``)."""
    what, expect = step["peek"], step["expect"]
    # The command and its reading, built once and sent on every poll.
    if "throttle" in what:
        # CL.THROTTLE with quantity 0: what is left, nothing taken.
        key, burst, count, period, _ = throttle_args({**what["throttle"], "key": what["key"]})
        args: tuple[Any, ...] = ("CL.THROTTLE", key, burst, count, period, 0)

        def remaining_of(reply: Any) -> int:
            return int(reply[2])
    else:
        p = policy(what["policy"], "peek")
        args = ("RL.PEEK", what["key"], *p.words)

        def remaining_of(reply: Any) -> int:
            return parse_decision(reply, p, False).remaining

    within = step.get("within_ms", expect.get("within_ms", 0)) / 1000
    until = time.monotonic() + within
    while True:
        remaining = remaining_of(c.execute_command(*args))
        if remaining == expect["remaining"] or time.monotonic() >= until:
            break
        time.sleep(0.005)  # a late reply's refund on its way, bounded by within_ms
    if remaining != expect["remaining"]:
        return [f"peek remaining {remaining} (expected {expect['remaining']})"]
    return []


def limiter_for(server: Server, scenario: dict[str, Any]) -> RateLimiter:
    """The runner's limiter, with the scenario's second tier."""
    tier = scenario.get("client", {})
    return RateLimiter.from_url(
        f"redis://127.0.0.1:{server.port}",
        deadline=tier.get("deadline_ms", 10_000) / 1000,
        fallback=tier.get("fallback", "raise"),
        deny_cache=DenyCache() if tier.get("deny_cache") else None,
        leases=Leases(int(tier["lease_block"])) if "lease_block" in tier else None,
    )


def take(c: redis.Redis, step: dict[str, Any]) -> list[str]:
    """A ``take`` step: another process's charge, sent on a connection the limiter does not see."""
    what = step["take"]
    p = policy(what["policy"], "take")
    reply = c.execute_command(p.command, what["key"], *p.single, "COST", what["cost"])
    if parse_decision(reply, p, False).allowed:
        return []
    return [f"take {what['cost']} on {what['key']}: denied"]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario_answers_as_written(server: Server, scenario: dict[str, Any]) -> None:
    c = server.client()
    c.flushall()
    c.config_resetstat()
    limiter = limiter_for(server, scenario)
    process = server.process
    assert process is not None
    failed: list[str] = []
    try:
        for i, step in enumerate(scenario["steps"]):
            if "clock_ms" in step:
                limiter.set_clock(step["clock_ms"] * 1000)
            if "clock_us" in step:
                limiter.set_clock(step["clock_us"])
            if step.get("freeze"):
                process.send_signal(signal.SIGSTOP)
            if step.get("resume"):
                process.send_signal(signal.SIGCONT)
            if "take" in step:
                failed += [f"step {i}: {x}" for x in take(c, step)]
            if "decide" in step or "throttle" in step:
                failed += [f"step {i}: {x}" for x in run_step(limiter, step)]
            if "peek" in step:
                failed += [f"step {i}: {x}" for x in peek(c, step)]
            if step.get("release"):
                limiter.refund_leases()
            expected = step.get("expect", {}).get("server_commands")
            if expected is not None and (got := server_commands(c)) != expected:
                failed.append(f"step {i}: server_commands {got} (expected {expected})")
    finally:
        process.send_signal(signal.SIGCONT)  # never leave the shared server frozen
    assert not failed, "\n".join(failed)
