"""/metrics in Prometheus's text exposition format, from the poller's last read.

Label values are bounded: ``command`` is the module's fixed set, ``policy``
the at most ``max_policies`` most called named policies, and
``ratelimit_top_denied`` at most ``top_keys`` keys. A scrape sends nothing to
the server.
"""

from __future__ import annotations

from rl_dashboard.parse import command_lines, counts, policy_lines, reported
from rl_dashboard.poller import State
from rl_dashboard.view import penalty, top_denied


def label(value: str) -> str:
    """A label value escaped as the text format requires."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Writer:
    """Metric families, each with its HELP and TYPE once."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.seen: set[str] = set()

    def add(
        self, name: str, kind: str, help_: str, value: float, labels: dict[str, str] | None = None
    ) -> None:
        """One sample of the family ``name``."""
        if name not in self.seen:
            self.seen.add(name)
            self.lines += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}"]
        text = ",".join(f'{k}="{label(v)}"' for k, v in (labels or {}).items())
        self.lines.append(f"{name}{{{text}}} {value:g}" if text else f"{name} {value:g}")

    def text(self) -> str:
        """The exposition."""
        return "\n".join(self.lines) + "\n"


def metrics(state: State, *, max_policies: int, top_keys: int) -> str:
    """The exposition for ``state``: only ``ratelimit_up 0`` while the server is unreachable."""
    w = Writer()
    s = state.last
    w.add("ratelimit_up", "gauge", "1 when the last read of the server succeeded.", int(state.up))
    if not state.up or s is None:
        return w.text()
    rl = s.info.get("ratelimit", {})
    w.add(
        "ratelimit_info",
        "gauge",
        "The server and the module, as labels.",
        1,
        {
            "module_version": rl.get("ratelimit_version", ""),
            "redis_version": s.info.get("server", {}).get("redis_version", ""),
            "role": s.info.get("replication", {}).get("role", ""),
            "clock": rl.get("ratelimit_clock", ""),
            "policies": "on" if s.module and s.module["policies"] else "off",
        },
    )
    for cmd, c in sorted(command_lines(rl).items()):
        w.add(
            "ratelimit_calls_total",
            "counter",
            "Calls per command.",
            c.get("calls", 0),
            {"command": cmd},
        )
    for cmd, c in sorted(command_lines(rl).items()):
        for outcome in ("allowed", "denied"):
            w.add(
                "ratelimit_decisions_total",
                "counter",
                "Decisions per command and outcome.",
                c.get(outcome, 0),
                {"command": cmd, "outcome": outcome},
            )
    for cmd, c in sorted(command_lines(rl).items()):
        w.add(
            "ratelimit_errors_total",
            "counter",
            "Calls answered with an error.",
            c.get("errors", 0),
            {"command": cmd},
        )
    w.add(
        "ratelimit_waiting", "gauge", "Clients waiting now.", int(rl.get("ratelimit_waiting", "0"))
    )
    waits = counts(rl.get("ratelimit_waits", ""))
    for outcome in ("started", "admitted", "timed_out", "abandoned"):
        w.add(
            "ratelimit_waits_total",
            "counter",
            "Waits by how they ended (started: begun).",
            waits.get(outcome, 0),
            {"outcome": outcome},
        )
    w.add(
        "ratelimit_waited_seconds_total",
        "counter",
        "Time clients spent waiting.",
        waits.get("waited_us", 0) / 1e6,
    )
    lines = reported(rl, "lines")
    if lines is not None:
        w.add("ratelimit_lines", "gauge", "Keys with clients waiting now.", lines.get("count", 0))
        w.add(
            "ratelimit_longest_wait_seconds",
            "gauge",
            "How long the client waiting longest has waited now.",
            lines.get("longest_wait_us", 0) / 1e6,
        )
    leases = reported(rl, "leases")
    if leases is not None:
        w.add(
            "ratelimit_leases_held",
            "gauge",
            "Concurrency leases held now (not yet released or past their deadline).",
            leases.get("held", 0),
        )
        for event in ("granted", "released", "expired"):
            if event in leases:
                w.add(
                    "ratelimit_leases_total",
                    "counter",
                    "Concurrency leases by event (granted, released, expired at their deadline).",
                    leases[event],
                    {"event": event},
                )
    w.add(
        "ratelimit_heap_bytes",
        "gauge",
        "Memory the module holds outside Redis's used_memory.",
        int(rl.get("ratelimit_heap_bytes", "0")),
    )
    for unit, n in sorted(counts(rl.get("ratelimit_work", "")).items()):
        w.add(
            "ratelimit_work_total",
            "counter",
            "Work in machine-independent units.",
            n,
            {"unit": unit},
        )
    pol = counts(rl.get("ratelimit_policies", ""))
    w.add("ratelimit_policies_defined", "gauge", "Named policies defined.", pol.get("defined", 0))
    for outcome in ("allowed", "denied", "shadow_denied"):
        w.add(
            "ratelimit_policies_decisions_total",
            "counter",
            "Decisions of calls naming any policy.",
            pol.get(outcome, 0),
            {"outcome": outcome},
        )
    for p in policy_lines(rl)[:max_policies]:
        for outcome in ("allowed", "denied", "shadow_denied"):
            w.add(
                "ratelimit_policy_decisions_total",
                "counter",
                "Decisions per named policy (the most called).",
                p.get(outcome, 0),
                {"policy": p["name"], "outcome": outcome},
            )
    for p in policy_lines(rl)[:max_policies]:
        w.add(
            "ratelimit_policy_waits_total",
            "counter",
            "Calls naming the policy that waited.",
            p.get("waits", 0),
            {"policy": p["name"]},
        )
    for name, value in sorted(s.bounds.items()):
        w.add("ratelimit_bound", "gauge", "The module's configured bounds.", value, {"name": name})
    for row in top_denied(s, top_keys):
        w.add(
            "ratelimit_top_denied",
            "gauge",
            "Denials of the most denied keys in this minute and the last (bounded set).",
            row["count"],
            {"policy": row["policy"], "key": row["key"]},
        )
    box = penalty(rl)
    if box is not None:
        w.add(
            "ratelimit_penalty_blocks_total",
            "counter",
            "Penalty-box blocks begun.",
            box["blocks"],
        )
        w.add(
            "ratelimit_penalty_denials_total",
            "counter",
            "Requests denied by a running penalty-box block.",
            box["denials"],
        )
    for key, ms_left, form in penalized(s.extras.get("penalized"))[:top_keys]:
        w.add(
            "ratelimit_penalized_seconds_left",
            "gauge",
            "Time left of the latest penalty-box blocks (bounded set).",
            ms_left / 1000,
            {"key": key, "form": form},
        )
    return w.text()


def penalized(rows: list[list[str]] | None) -> list[tuple[str, int, str]]:
    """RL.PENALIZED's rows as ``(key, ms_left, form)``; a row of another shape is left out."""
    out: list[tuple[str, int, str]] = []
    for r in rows or []:
        if len(r) == 3 and r[1].lstrip("-").isdigit():
            out.append((r[0], int(r[1]), r[2]))
    return out
