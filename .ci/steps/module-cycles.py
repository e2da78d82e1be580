#!/usr/bin/env python3
"""Fails when, inside one crate, two sibling modules depend on each other (directly or round a
longer loop): `a` uses `crate::b::…` and `b` uses `crate::a::…`. A module tree without such
loops reads top-down: each module can be understood from the ones it uses.

For every crate under crates/, every `crate::`, `super::` and `self::` path in the code (comments
and string literals skipped) is resolved to the module it names; a reference from anywhere under
sibling `a` to anywhere under sibling `b` is an edge a → b among the children of their common
parent. Test modules (`tests.rs`, `*_tests.rs`, a `mod tests` block) may use their parent, so
references from them are not counted.

Loops that exist already are listed in module-cycles.allow beside this script, one per line
(`crate: a, b`); the check fails on any other loop, and on a listed one that is gone (so the list
only shrinks).

Usage: module-cycles.py [WORKSPACE_ROOT]   (exit 1 and the loops printed when there is one)
"""
import os
import re
import sys

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\}", re.S)


def strip(code):
    """The code without comments, string and char literals (kept as blanks)."""
    out, i, n = [], 0, len(code)
    while i < n:
        c = code[i]
        if code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == "r" and re.match(r'r#*"', code[i:]) and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_")):
            hashes = re.match(r"r(#*)\"", code[i:]).group(1)
            j = code.find('"' + hashes, i + 2 + len(hashes))
            i = n if j < 0 else j + 1 + len(hashes)
            out.append('""')
        elif c == '"':
            j = i + 1
            while j < n and code[j] != '"':
                j += 2 if code[j] == "\\" else 1
            i = j + 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", code[i:]):
            i += len(re.match(r"'(\\.|[^\\'])'", code[i:]).group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def modules_of(src):
    """{module path tuple: file} for a crate's src folder."""
    mods = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)[:-3].split(os.sep)
            if rel in (["lib"], ["main"]):
                key = ()
            elif rel[-1] == "mod":
                key = tuple(rel[:-1])
            else:
                key = tuple(rel)
            if len(key) == 1 and key[0] in ("lib", "main"):
                continue
            if len(key) >= 1 and key[0] == "bin":
                continue
            mods[key] = os.path.join(dirpath, f)
    return mods


def is_test(key):
    return bool(key) and (key[-1] == "tests" or key[-1].endswith("_tests"))


def resolve(mods, here, kind, segs):
    """The longest module named by `kind::segs` from module `here` (None if outside)."""
    if kind == "crate":
        base = ()
    else:
        base = here
        if kind == "super":
            if not base:
                return None
            base = base[:-1]
        while segs and segs[0] == "super":
            if not base:
                return None
            base, segs = base[:-1], segs[1:]
    path = base + tuple(segs)
    while path and path not in mods:
        path = path[:-1]
    return path


def edges_of(mods):
    edges = set()
    for here, f in mods.items():
        if is_test(here):
            continue
        code = strip(open(f, encoding="utf-8").read())
        # Everything after a `#[cfg(test)] mod tests {` is the test module's.
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", code)
        if m:
            code = code[: m.start()]
        refs = []
        for g in USE_GROUP.finditer(code):
            kind, prefix, body = g.group(1), g.group(2), g.group(3)
            for item in re.findall(r"[A-Za-z_][A-Za-z0-9_:]*", body):
                refs.append((kind, [s for s in (prefix + "::" + item).split("::") if s]))
        for p in PATH.finditer(code):
            refs.append((p.group(1), [s for s in p.group(2).split("::") if s]))
        for kind, segs in refs:
            target = resolve(mods, here, kind, segs)
            if target is None:
                continue
            # The children of the common parent that hold `here` and `target`.
            k = 0
            while k < min(len(here), len(target)) and here[k] == target[k]:
                k += 1
            if k < len(here) and k < len(target):
                edges.add((here[: k + 1], target[: k + 1]))
    return edges


def cycles(edges):
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..")
    allow = set()
    allow_file = os.path.join(here, "module-cycles.allow")
    if os.path.exists(allow_file):
        for line in open(allow_file, encoding="utf-8"):
            line = line.split("#", 1)[0].strip()
            if line:
                allow.add(line)
    crates = os.path.join(root, "crates")
    found, bad = set(), 0
    for c in sorted(os.listdir(crates)):
        src = os.path.join(crates, c, "src")
        if not os.path.isdir(src):
            continue
        mods = modules_of(src)
        edges = edges_of(mods)
        for comp in cycles(edges):
            names = ", ".join("::".join(m) for m in comp)
            found.add(f"{c}: {names}")
            if f"{c}: {names}" in allow:
                print(f"{c}: known loop (module-cycles.allow): {names}")
                continue
            bad += 1
            print(f"{c}: modules depend on each other: {names}")
            for a, b in sorted(edges):
                if a in comp and b in comp:
                    print(f"    {'::'.join(a)} uses {'::'.join(b)}")
        print(f"{c}: {len(mods)} modules, {len(edges)} dependencies between siblings")
    for gone in sorted(allow - found):
        bad += 1
        print(f"module-cycles.allow lists a loop that is gone: {gone} (remove the line)")
    if bad:
        print(f"module-cycles: {bad} problem(s)")
        return 1
    print(f"module-cycles: no new loops ({len(found)} known)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
