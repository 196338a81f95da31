#!/usr/bin/env python3
"""Splits a callgrind profile of redis-server into where a request's
instructions go, per request:

  outside  networking, parsing, and Redis's call() around the command
  frame    what a module command costs for being one (Redis's dispatcher,
           the command context); 0 for Redis's own commands
  code     the command's own code (the module's, or Redis's own command)
  api      other module API calls (argument bytes, the clock, flags)
  key      key access: lookup, create, write, expiry, keyspace signals
  reply    writing the reply
  repl     replication: building and propagating the replicated command(s)
  alloc    allocator calls made inside call() (by any part above)

  callgrind_parts.py REQUESTS MODULE_SO[,MODULE_SO...] FILE [FILE ...]

prints one tab-separated line per FILE: the file, then total and the parts
above. The parts add up to the total. The walk follows callgrind's
caller-callee edges from call(), dividing a callee's cost among its callers
in proportion; functions called from several parts (the allocator, dict
lookups) are classified by name.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict

PARTS = ["outside", "frame", "code", "api", "key", "reply", "repl", "alloc"]

ALLOC = re.compile(
    r"^(z(try)?(malloc|calloc|realloc|free)\w*|je_\w+|malloc|free|calloc|realloc"
    r"|malloc_usable_size|mallocx|rallocx|sdallocx|xallocx|posix_memalign"
    r"|[RV]M_(Alloc|Free|Realloc|Calloc|TryAlloc)|__rust_(alloc|dealloc|realloc|alloc_zeroed)"
    r"|_?_?rdl?_(alloc|dealloc|realloc)\w*|\w*imalloc\w*|\w*ifree\w*|\w*tcache\w*"
    r"|arena_\w+|extent_\w+|sz_\w+)$"
)
REPLY = re.compile(
    r"^([RV]M_ReplyWith\w+|_?addReply\w*|prepareClientToWrite|moduleReply\w*)$"
)
REPL = re.compile(
    r"^([RV]M_Replicate\w*|moduleCreateArgvFromUserFormat|alsoPropagate|propagate\w*"
    r"|rewriteClientCommand\w*|replaceClientCommandVector|feedAppendOnlyFile\w*"
    r"|replicationFeed\w*|catAppendOnly\w*|postExecutionUnitOperations)$"
)
KEY = re.compile(
    r"^(lookupKey\w*|dbAdd\w*|dbSet\w*|dbOverwrite|setKey|setExpire|getExpire|removeExpire"
    r"|dbDelete\w*|dbGenericDelete|dbSyncDelete|signalModifiedKey|notifyKeyspaceEvent"
    r"|touchWatchedKey|keyIsExpired|expireIfNeeded|dbUnshareStringValue|dictFind\w*"
    r"|dictAdd\w*|dictReplace|[RV]M_OpenKey|[RV]M_CloseKey|[RV]M_KeyType|[RV]M_StringDMA|[RV]M_ValueLength"
    r"|[RV]M_StringTruncate|[RV]M_SetAbsExpire|[RV]M_SetExpire|[RV]M_GetAbsExpire|[RV]M_GetExpire"
    r"|[RV]M_StringSet|[RV]M_DeleteKey|[RV]M_SignalModifiedKey|moduleDelKeyIfEmpty"
    r"|moduleCloseKey|moduleInitKey\w*|expireGenericCommand|updateKeysizes\w*)$"
)
FRAME = re.compile(
    r"^((?:Redis|Valkey)ModuleCommandDispatcher|moduleCreateContext|moduleFreeContext"
    r"|moduleHandlePropagationAfterCommandCallback|autoMemoryCollect)$"
)
# Helpers the compiler calls for the caller's own work: part of the caller's.
HELPERS = re.compile(
    r"^(__mem\w+|mem(cpy|move|set|cmp)|__strlen\w*|strlen|__udivti3|__umodti3|__divti3"
    r"|__multi3|0x[0-9a-f]+)$"
)
# The command functions call() reaches: Redis's own, and the module's.
COMMANDS = re.compile(r"^(\w+Command|(?:Redis|Valkey)ModuleCommandDispatcher)$")


def strip(name: str) -> str:
    """A function's bare name: no arguments, no file, no Rust hash."""
    name = name.split("'")[0]
    name = re.sub(r"\(.*$", "", name)
    name = re.sub(r"::h[0-9a-f]{16}$", "", name)
    return name.rsplit("::", 1)[-1] if "::" in name else name


class Profile:
    def __init__(self, path: str) -> None:
        self.self_cost: dict[str, int] = defaultdict(int)
        self.edges: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.obj: dict[str, str] = {}
        self.total = 0
        names: dict[str, dict[str, str]] = {"ob": {}, "fl": {}, "fn": {}}
        space = {
            "ob": "ob",
            "cob": "ob",
            "fl": "fl",
            "fi": "fl",
            "fe": "fl",
            "cfi": "fl",
            "cfl": "fl",
            "fn": "fn",
            "cfn": "fn",
        }
        ob = cob = fn = cfn = ""
        pending_call = False
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line:
                    continue
                c = line[0]
                if c.isdigit() or c in "+-*":
                    cost = int(line.split()[-1]) if len(line.split()) > 1 else 0
                    if pending_call:
                        self.edges[fn][cfn] += cost
                        pending_call = False
                        cob = ob
                    else:
                        self.self_cost[fn] += cost
                        self.total += cost
                    continue
                key, _, value = line.partition("=")
                if key in space:
                    m = re.match(r"\((\d+)\)(?: (.*))?$", value)
                    table = names[space[key]]
                    if m:
                        if m.group(2) is not None:
                            table[m.group(1)] = m.group(2)
                        value = table.get(m.group(1), "?")
                    if key == "ob":
                        ob = value
                        cob = ob
                    elif key == "cob":
                        cob = value
                    elif key == "fn":
                        fn = value
                        self.obj.setdefault(fn, ob)
                        cob = ob
                    elif key == "cfn":
                        cfn = value
                        self.obj.setdefault(cfn, cob)
                elif key == "calls":
                    pending_call = True

    def inclusive(self, fn: str) -> int:
        return self.self_cost.get(fn, 0) + sum(self.edges.get(fn, {}).values())


def classify(callee: str, part: str, in_module: bool, caller_in_module: bool) -> str:
    """The part a call from a function of `part` to `callee` belongs to."""
    bare = strip(callee)
    if ALLOC.match(bare):
        return "alloc"
    if HELPERS.match(bare):
        return "code" if caller_in_module and part not in ("outside", "frame") else part
    if part in ("key", "reply", "repl", "alloc"):
        return part
    if REPL.match(bare):
        return "repl"
    if part == "outside":
        if COMMANDS.match(bare):
            return "frame" if bare.endswith("ModuleCommandDispatcher") else "code"
        return "outside"
    if REPLY.match(bare):
        return "reply"
    if KEY.match(bare):
        return "key"
    if in_module:
        return "code"
    if FRAME.match(bare) or part == "frame":
        return "frame"
    if part == "code" and caller_in_module:
        return "api"
    return part


def parts(profile: Profile, module: str) -> dict[str, float]:
    """The instructions of each part, summed over the profile."""
    out: dict[str, float] = defaultdict(float)
    # Below this a call's cost is not followed further (it stays in its part).
    floor = profile.total * 1e-6
    calls = {fn for fn in list(profile.self_cost) + list(profile.edges) if fn == "call"}

    modules = module.split(",")

    def in_module(fn: str) -> bool:
        obj = profile.obj.get(fn, "")
        return any(m in obj for m in modules)

    def walk(fn: str, scale: float, part: str, stack: tuple[str, ...]) -> None:
        out[part] += profile.self_cost.get(fn, 0) * scale
        for callee, cost in profile.edges.get(fn, {}).items():
            share = cost * scale
            if share <= 0:
                continue
            sub = classify(callee, part, in_module(callee), in_module(fn))
            inc = profile.inclusive(callee)
            if callee in stack or len(stack) > 80 or inc <= 0 or share < floor:
                out[sub] += share
                continue
            walk(callee, share / inc, sub, stack + (callee,))

    inside = 0
    for fn in calls:
        walk(fn, 1.0, "outside", (fn,))
        inside += profile.inclusive(fn)
    out["outside"] += profile.total - inside
    return out


def main() -> None:
    requests = int(sys.argv[1])
    module = sys.argv[2]
    for path in sys.argv[3:]:
        profile = Profile(path)
        split = parts(profile, module)
        row = [path, str(round(profile.total / requests))]
        row += [str(round(split.get(p, 0.0) / requests)) for p in PARTS]
        print("\t".join(row))


if __name__ == "__main__":
    main()
