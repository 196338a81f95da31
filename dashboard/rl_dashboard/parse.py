"""Replies as the server sends them, turned into plain dictionaries."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote


def parse_info(text: str) -> dict[str, dict[str, str]]:
    """INFO's sections by lower-case name, each ``field -> value`` as written."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("#"):
            current = sections.setdefault(line[1:].strip().lower(), {})
        elif ":" in line:
            k, _, v = line.partition(":")
            current[k] = v
    return sections


def fields(value: str) -> dict[str, str]:
    """``a=1,b=2`` as a dictionary (a policy's name is %XX-escaped, so it holds no ``,``)."""
    out: dict[str, str] = {}
    for part in value.split(","):
        k, sep, v = part.partition("=")
        if sep:
            out[k] = v
    return out


def counts(value: str) -> dict[str, int]:
    """The numeric fields of ``a=1,b=2``."""
    return {k: int(v) for k, v in fields(value).items() if v.lstrip("-").isdigit()}


def reported(section: dict[str, str], line: str) -> dict[str, int] | None:
    """The numeric fields of INFO's ``ratelimit_<line>``; None when the server lacks it."""
    value = section.get("ratelimit_" + line)
    return None if value is None else counts(value)


def reported_field(section: dict[str, str], name: str) -> int | None:
    """``name`` as INFO gives it: ``ratelimit_<name>:N`` or ``name=N`` in a line; None if absent."""
    value = section.get("ratelimit_" + name)
    if value is not None and value.isdigit():
        return int(value)
    for line in section.values():
        if f"{name}=" in line:
            found = counts(line).get(name)
            if found is not None:
                return found
    return None


def command_lines(section: dict[str, str]) -> dict[str, dict[str, int]]:
    """Per command (``rl.gcra``, ``cl.throttle``, ``rl.policy.stats``): calls, allowed, ..."""
    out: dict[str, dict[str, int]] = {}
    for k, v in section.items():
        if k.startswith(("ratelimit_rl_", "ratelimit_cl_")):
            name = k.removeprefix("ratelimit_")
            out[name[:2] + "." + name[3:].replace("_", ".")] = counts(v)
    return out


def policy_lines(section: dict[str, str]) -> list[dict[str, Any]]:
    """The listed policies, most called first: name (decoded) and its counts."""
    rows: list[tuple[int, dict[str, Any]]] = []
    for k, v in section.items():
        if k.startswith("ratelimit_policy_") and k.removeprefix("ratelimit_policy_").isdigit():
            f = fields(v)
            row: dict[str, Any] = {"name": unquote(f.pop("name", ""))}
            row.update({n: int(x) for n, x in f.items() if x.isdigit()})
            rows.append((int(k.removeprefix("ratelimit_policy_")), row))
    return [r for _, r in sorted(rows, key=lambda x: x[0])]


def pairs(reply: Any) -> dict[str, Any]:
    """A RESP3 map or a RESP2 flat array of names and values, as a dictionary."""
    if isinstance(reply, dict):
        return {str(k): v for k, v in reply.items()}
    return {str(reply[i]): reply[i + 1] for i in range(0, len(reply) - 1, 2)}


def module_args(reply: Any) -> dict[str, Any] | None:
    """The ratelimit module in MODULE LIST: version and arguments; None when it is not loaded."""
    for entry in reply:
        m = pairs(entry)
        if m.get("name") == "ratelimit":
            args = [str(a) for a in m.get("args") or []]
            policies = any(
                a.lower() == "policies" and i + 1 < len(args) and args[i + 1].lower() == "on"
                for i, a in enumerate(args)
            )
            return {"ver": m.get("ver"), "args": args, "policies": policies}
    return None


def parse_stats(reply: Any) -> dict[str, Any]:
    """RL.POLICY STATS: the counts and ``top_denied`` as ``[key, count, error]`` rows."""
    m = pairs(reply)
    top = [[str(r[0]), int(r[1]), int(r[2])] for r in m.get("top_denied") or []]
    out: dict[str, Any] = {k: int(v) for k, v in m.items() if k != "top_denied"}
    out["top_denied"] = top
    return out


def bounds(reply: Any) -> dict[str, int]:
    """CONFIG GET ratelimit.*: each setting without its prefix."""
    return {
        k.removeprefix("ratelimit."): int(v)
        for k, v in pairs(reply).items()
        if str(v).lstrip("-").isdigit()
    }
