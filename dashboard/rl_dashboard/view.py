"""What the page and /metrics show, computed from the poller's state (no server call)."""

from __future__ import annotations

from datetime import datetime, timezone
from itertools import pairwise
from typing import Any

from rl_dashboard.features import Feature
from rl_dashboard.parse import command_lines, counts, policy_lines, reported, reported_field
from rl_dashboard.poller import Sample, State

USED_BY = {
    "max-waiters": "waiting",
    "max-policies": "policies defined",
    "max-denied-keys": "keys denied",
    "penalized-keys": "keys penalized",
}
"""Bounds with a server-wide use the module reports: what fills them (the
others bound one key, a line or a call)."""


def iso(t: float | None) -> str | None:
    """A Unix time as ISO 8601 UTC, seconds."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds")


def used(sample: Sample) -> dict[str, int]:
    """The current use of each bound in ``USED_BY``."""
    rl = sample.info.get("ratelimit", {})
    use = {
        "max-waiters": int(rl.get("ratelimit_waiting", "0")),
        "max-policies": counts(rl.get("ratelimit_policies", "")).get("defined", 0),
    }
    # Reported only by servers with the deny list and the penalty box.
    denied = reported(rl, "deny_list")
    if denied is not None:
        use["max-denied-keys"] = denied.get("keys", 0)
    penalized = rl.get("ratelimit_penalty_listed")
    if penalized is not None and penalized.isdigit():
        use["penalized-keys"] = int(penalized)
    return use


def penalty(rl: dict[str, str]) -> dict[str, int] | None:
    """The penalty box's blocks begun and requests denied by a block; None if not reported."""
    blocks, denials = reported_field(rl, "penalty_blocks"), reported_field(rl, "penalty_denials")
    if blocks is None and denials is None:
        line = reported(rl, "penalty")  # the same counts as one line: blocks=,denials=
        if line is None:
            return None
        blocks, denials = line.get("blocks"), line.get("denials")
    return {"blocks": blocks or 0, "denials": denials or 0}


def totals(sample: Sample) -> dict[str, int]:
    """Decisions over every command, waits begun, and the named policies' shadow denials."""
    cmds = command_lines(sample.info.get("ratelimit", {}))
    pol = counts(sample.info.get("ratelimit", {}).get("ratelimit_policies", ""))
    waits = counts(sample.info.get("ratelimit", {}).get("ratelimit_waits", ""))
    return {
        "waits": waits.get("started", 0),
        "allowed": sum(c.get("allowed", 0) for c in cmds.values()),
        "denied": sum(c.get("denied", 0) for c in cmds.values()),
        "shadow_denied": pol.get("shadow_denied", 0),
    }


def rate(prev: int, cur: int, dt: float) -> float:
    """A counter's rate per second; a counter that went down restarted from zero."""
    delta = cur - prev if cur >= prev else cur
    return round(delta / dt, 3) if dt > 0 else 0.0


def series(history: list[Sample]) -> dict[str, Any]:
    """Rates per second between consecutive samples, and gauges, for the charts."""
    out: dict[str, Any] = {
        "t": [],
        "allowed": [],
        "denied": [],
        "shadow_denied": [],
        "waits": [],
        "waiting": [],
        "lines": [],
        "longest_wait_s": [],
        "heap_bytes": [],
        "commands": {},
        "policies": {},
    }
    for prev, cur in pairwise(history):
        dt = cur.t - prev.t
        out["t"].append(round(cur.t, 3))
        pt, ct = totals(prev), totals(cur)
        for k in ("allowed", "denied", "shadow_denied", "waits"):
            out[k].append(rate(pt[k], ct[k], dt))
        rl = cur.info.get("ratelimit", {})
        out["waiting"].append(int(rl.get("ratelimit_waiting", "0")))
        lines = reported(rl, "lines") or {}
        out["lines"].append(lines.get("count", 0))
        out["longest_wait_s"].append(lines.get("longest_wait_us", 0) / 1e6)
        out["heap_bytes"].append(int(rl.get("ratelimit_heap_bytes", "0")))
    # Per command and per policy: the last sample's names, over the whole window.
    if len(history) >= 2:
        cmd_hist = [command_lines(s.info.get("ratelimit", {})) for s in history]
        pol_hist = [
            {p["name"]: p for p in policy_lines(s.info.get("ratelimit", {}))} for s in history
        ]
        for name, c in cmd_hist[-1].items():
            if c.get("allowed", 0) + c.get("denied", 0) == 0:
                continue
            out["commands"][name] = {
                k: [
                    rate(a.get(name, {}).get(k, 0), b.get(name, {}).get(k, 0), s2.t - s1.t)
                    for a, b, s1, s2 in zip(
                        cmd_hist, cmd_hist[1:], history, history[1:], strict=False
                    )
                ]
                for k in ("allowed", "denied")
            }
        for name in pol_hist[-1]:
            out["policies"][name] = {
                k: [
                    rate(a.get(name, {}).get(k, 0), b.get(name, {}).get(k, 0), s2.t - s1.t)
                    for a, b, s1, s2 in zip(
                        pol_hist, pol_hist[1:], history, history[1:], strict=False
                    )
                ]
                for k in ("allowed", "denied", "shadow_denied", "waits")
            }
    return out


def top_denied(sample: Sample, n: int) -> list[dict[str, Any]]:
    """The most denied keys over the policies read, most first, at most ``n``."""
    rows = [
        {"policy": name, "key": k, "count": c, "error": e}
        for name, st in sample.stats.items()
        for k, c, e in st["top_denied"]
    ]
    rows.sort(key=lambda r: (-r["count"], r["policy"], r["key"]))
    return rows[:n]


def page_state(state: State, features: tuple[Feature, ...], *, top_keys: int) -> dict[str, Any]:
    """The JSON the page draws: the last sample, the outage if any, and the history."""
    s = state.last
    out: dict[str, Any] = {
        "target": state.target,
        "up": state.up,
        "down_since": iso(state.down_since),
        "error": state.error,
        "read_at": iso(s.t) if s else None,
        "features": [
            {"name": f.name, "title": f.title, "offered": state.offered.get(f.name, False)}
            for f in features
        ],
    }
    if s is None:
        return out
    rl = s.info.get("ratelimit", {})
    use = used(s)
    out.update(
        {
            "server": {
                "role": s.info.get("replication", {}).get("role", "?"),
                "redis_version": s.info.get("server", {}).get("redis_version", "?"),
                "module_version": rl.get("ratelimit_version", "?"),
                "clock": rl.get("ratelimit_clock", "?"),
                "loaded": s.module is not None,
                "policies_on": bool(s.module and s.module["policies"]),
                "args": " ".join(s.module["args"]) if s.module else "",
            },
            "commands": {
                k: v
                for k, v in command_lines(rl).items()
                if v.get("calls", 0) > 0 or k in ("rl.gcra", "rl.check")
            },
            "policies": policy_lines(rl),
            "policies_total": counts(rl.get("ratelimit_policies", "")),
            "waiting": int(rl.get("ratelimit_waiting", "0")),
            "waits": counts(rl.get("ratelimit_waits", "")),
            "lines": reported(rl, "lines"),
            "leases": reported(rl, "leases"),
            "penalty": penalty(rl),
            "heap_bytes": int(rl.get("ratelimit_heap_bytes", "0")),
            "work": counts(rl.get("ratelimit_work", "")),
            "bounds": [
                {"name": k, "value": v, "used": use.get(k), "used_by": USED_BY.get(k)}
                for k, v in sorted(s.bounds.items())
            ],
            "top_denied": top_denied(s, top_keys),
            "extras": s.extras,
            "series": series(list(state.history)),
        }
    )
    return out
