#!/usr/bin/env python3
"""The import measurement of runtime/src: which file uses which, as arrows between parts.

Reads every `.rs` file under runtime/src (tests left out: `tests*.rs`, `*_tests.rs`, and the
`#[cfg(test)]` module at the end of a file), resolves its `use` lines and the `crate::`,
`super::` and `self::` paths in its code to the files that define them (following `#[path]`
attributes and `use`/`pub use` re-exports), and reports:

- the arrows between parts (a part is a top-level module: `store`, `daemon`, ...), each with
  the number of file-to-file uses behind it;
- upward arrows: from a part on a lower floor to one on a higher floor (FLOORS below, the
  order the crate's doc states: edges -> daemon -> config -> parts -> leaves);
- circles: files that reach each other through uses, except a module and its own ancestors
  (a child naming its parent's types and a parent declaring its children is how a module is
  built, not a circle).

Exit status 1 when there is an upward arrow or a circle, so CI fails on one.
Usage: .ci/imports.py [--root DIR] [--arrows]   (DIR: the repository, default: this one)
"""

import argparse
import os
import re
import sys
from collections import defaultdict

# Floors, top first. A part may use parts on its own floor or below, never above; the parts'
# floor is ordered further by the absence of circles.
FLOORS = [
    ["main", "cli", "api"],
    ["daemon"],
    ["config"],
    ["pipeline", "sink", "ingest", "store", "notify", "namespace", "linux", "procfs", "pcp",
     "fabric", "fleet", "guests", "kit", "host", "sample"],
    ["lineproto", "nats", "supervise", "telemetry", "logging", "duration", "util", "flat", "testutil"],
]
FLOOR = {part: i for i, floor in enumerate(FLOORS) for part in floor}

USE_RE = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M | re.S)
MOD_RE = re.compile(r"(#\[path\s*=\s*\"([^\"]+)\"\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
PATH_RE = re.compile(r"\b((?:crate|super|self)(?:::\w+)+)")


def strip(text):
    """The code without comments, string literals and the trailing test module."""
    m = re.search(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+\w+\s*\{", text)
    if m:
        text = text[: m.start()]
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return text


def expand(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (`as` renames kept as (path, name))."""
    tree = re.sub(r"\s*(::|\{|\}|,)\s*", r"\1", tree.strip())
    out = []

    def walk(prefix, t):
        i = t.find("{")
        if i < 0:
            out.extend(prefix + part for part in split(t))
            return
        head, body = t[:i], t[i + 1 : t.rindex("}")]
        for part in split(body):
            walk(prefix + head, part) if "{" in part else out.append(prefix + head + part)

    def split(s):
        depth, cur, parts = 0, "", []
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        if cur:
            parts.append(cur)
        return [p for p in parts if p]

    walk("", tree)
    return out


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = {}  # module path (tuple) -> file
        self.code = {}  # module path -> stripped code
        self.imports = {}  # module path -> {name: absolute path tuple}
        self.load(("crate",), os.path.join(src, "lib.rs"), src)
        self.load(("crate", "main"), os.path.join(src, "main.rs"), src)

    def load(self, mod, file, dir_for_children):
        if not os.path.exists(file) or is_test(file):
            return
        text = open(file, encoding="utf-8").read()
        code = strip(text)
        self.files[mod] = file
        self.code[mod] = code
        for m in MOD_RE.finditer(code):
            path_attr, name = m.group(2), m.group(3)
            if path_attr:
                child = os.path.normpath(os.path.join(os.path.dirname(file), path_attr))
                self.load(mod + (name,), child, os.path.join(os.path.dirname(child), name))
                continue
            for cand in (os.path.join(dir_for_children, name + ".rs"),
                         os.path.join(dir_for_children, name, "mod.rs")):
                if os.path.exists(cand):
                    sub = os.path.join(dir_for_children, name)
                    self.load(mod + (name,), cand, sub)
                    break

    def absolute(self, mod, path):
        """A path as written in module `mod`, made absolute (a tuple from `crate`)."""
        segs = path.split("::")
        if segs[0] == "crate":
            return tuple(segs)
        base = list(mod)
        while segs and segs[0] in ("self", "super"):
            if segs.pop(0) == "super":
                base.pop()
        return tuple(base + segs)

    def build_imports(self):
        for mod, code in self.code.items():
            names = {}
            for m in USE_RE.finditer(code):
                for p in expand(m.group(2)):
                    rename = None
                    mm = re.match(r"(.*?)\s+as\s+(\w+)$", p)
                    if mm:
                        p, rename = mm.group(1), mm.group(2)
                    if not re.match(r"(crate|super|self)\b", p):
                        first = p.split("::")[0]
                        if mod + (first,) in self.files:
                            p = "self::" + p
                        else:
                            continue
                    a = self.absolute(mod, p.rstrip(":*").rstrip(":"))
                    if p.endswith("*"):
                        continue
                    leaf = rename or a[-1]
                    if leaf == "self":
                        a = a[:-1]
                        leaf = rename or a[-1]
                    names[leaf] = a
            self.imports[mod] = names

    def resolve(self, path, depth=0):
        """The module (file) that defines the item an absolute path names."""
        best = ("crate",)
        for i in range(len(path), 0, -1):
            if path[:i] in self.files:
                best = path[:i]
                rest = path[i:]
                break
        else:
            return best
        if rest and depth < 8:
            alias = self.imports.get(best, {}).get(rest[0])
            if alias:
                return self.resolve(alias + rest[1:], depth + 1)
        return best

    def arrows(self):
        """(from module, to module) for every use, tests and self-uses left out."""
        edges = set()
        for mod, code in self.code.items():
            for leaf, target in self.imports[mod].items():
                edges.add((mod, self.resolve(target)))
            inline = set(re.findall(r"\bmod\s+(\w+)\s*\{", code))
            for m in PATH_RE.finditer(code):
                segs = m.group(1).split("::")
                if segs[0] == "super" and len(segs) > 1 and segs[1] in inline:
                    continue  # `super::x` inside this file's inline `mod x { ... }` sibling
                edges.add((mod, self.resolve(self.absolute(mod, m.group(1)))))
            # Bare paths to a child module: `child::Item`.
            for name in re.findall(r"(?<![:\w])(\w+)::", code):
                if mod + (name,) in self.files:
                    edges.add((mod, self.resolve(mod + (name,))))
        return {(a, b) for a, b in edges if a != b and b != ("crate",)}


def is_test(file):
    base = os.path.basename(file)
    return base.startswith("tests") or base.endswith("_tests.rs") or base == "testutil.rs"


def part(mod):
    return mod[1] if len(mod) > 1 else "crate"


def related(a, b):
    """One module is the other's ancestor."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def circles(nodes, edges):
    """Strongly connected components of more than one module (Tarjan)."""
    graph = defaultdict(list)
    for a, b in edges:
        if not related(a, b):
            graph[a].append(b)
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def name(mod):
    return "::".join(mod[1:]) or "crate"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--arrows", action="store_true", help="list every arrow between parts")
    args = ap.parse_args()
    crate = Crate(os.path.join(args.root, "runtime", "src"))
    crate.build_imports()
    edges = crate.arrows()
    parts = defaultdict(int)
    for a, b in edges:
        if part(a) != part(b):
            parts[(part(a), part(b))] += 1
    up = sorted((a, b) for (a, b) in parts if FLOOR.get(a, 3) > FLOOR.get(b, 3))
    unknown = sorted({p for ab in parts for p in ab if p not in FLOOR})
    found = circles(sorted(crate.files), edges)
    rooms = sorted({part(m) for m in crate.files})
    print(f"{len(crate.files)} files, {len(rooms)} parts, {len(parts)} arrows between parts, "
          f"{len(up)} upward, {len(found)} circles")
    if args.arrows:
        for (a, b), n in sorted(parts.items()):
            print(f"  {a} -> {b} ({n})")
    for a, b in up:
        users = sorted(name(x) + " -> " + name(y) for x, y in edges if part(x) == a and part(y) == b)
        print(f"upward: {a} -> {b}: " + "; ".join(users))
    for comp in found:
        print(f"circle ({len(comp)} files): " + ", ".join(name(m) for m in comp))
    for p in unknown:
        print(f"part {p} has no floor in .ci/imports.py's FLOORS")
    return 1 if up or found or unknown else 0


if __name__ == "__main__":
    sys.exit(main())
