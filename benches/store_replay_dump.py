#!/usr/bin/env python3
"""Turns PCP archives into the replay files of `benches/store_replay.rs`.

    python3 benches/store_replay_dump.py OUTDIR ARCHIVE...

One `OUTDIR/NAME.tsv` per archive (NAME: the archive's base name), a line per value:
`ts<TAB>archive<TAB>metric|instance<TAB>value`, `ts` in seconds since the epoch. Numeric
values only; counters become per-second rates between consecutive records of the same
instance (as PCP's clients show them), a counter that went backwards (a wrap or a restart)
gives no value for that interval. Reads `pmdumplog -d` (descriptors) and `pmdumplog -z -xxx`
(values) of Debian's pcp package.
"""

import os
import re
import subprocess
import sys

RECORD = re.compile(r"^\S.* \(\d+\.\d+\) (\d+) \d+ metrics?$")
TIME = re.compile(r"\d\d:\d\d:\d\d(\.\d+)")
METRIC = re.compile(r"^    \S+ \(([^)]+)\):(.*)$")
INST = re.compile(r'inst \[\d+ or "([^"]*)"\] value (\S+)$')
PLAIN = re.compile(r"^ value (\S+)$")


def semantics(archive):
    """metric name -> 'counter' / 'instant' / 'discrete'."""
    out = subprocess.run(
        ["pmdumplog", "-d", archive], capture_output=True, text=True, check=True
    ).stdout
    sem, name = {}, None
    for line in out.splitlines():
        m = re.match(r"^PMID: \S+ \(([^)]+)\)", line)
        if m:
            name = m.group(1)
            continue
        m = re.search(r"Semantics: (\S+)", line)
        if m and name:
            sem[name] = m.group(1)
    return sem


def number(text):
    try:
        v = float(text)
    except ValueError:
        return None
    return v if v == v else None


def dump(archive, outdir):
    name = os.path.basename(archive)
    sem = semantics(archive)
    proc = subprocess.Popen(
        ["pmdumplog", "-z", "-xxx", archive], stdout=subprocess.PIPE, text=True
    )
    ts, metric = None, None
    last = {}  # counter series -> (ts, raw value)
    rows = 0
    with open(os.path.join(outdir, name + ".tsv"), "w") as out:

        def emit(series, value):
            nonlocal rows
            m = series.split("|", 1)[0]
            if sem.get(m) == "counter":
                prev = last.get(series)
                last[series] = (ts, value)
                if prev is None or ts <= prev[0] or value < prev[1]:
                    return
                value = (value - prev[1]) / (ts - prev[0])
            out.write(f"{ts:.6f}\t{name}\t{series}\t{value!r}\n")
            rows += 1

        for line in proc.stdout:
            line = line.rstrip("\n")
            r = RECORD.match(line)
            if r:
                frac = TIME.search(line)
                ts = int(r.group(1)) + (float(frac.group(1)) if frac else 0.0)
                metric = None
                continue
            m = METRIC.match(line)
            if m and ts is not None:
                metric, rest = m.group(1), m.group(2)
                i = INST.search(rest)
                p = PLAIN.match(rest)
                if i and number(i.group(2)) is not None:
                    emit(f"{metric}|{i.group(1)}", number(i.group(2)))
                elif p and number(p.group(1)) is not None:
                    emit(f"{metric}|", number(p.group(1)))
                continue
            i = INST.search(line)
            if i and metric and line.startswith("        ") and ts is not None:
                v = number(i.group(2))
                if v is not None:
                    emit(f"{metric}|{i.group(1)}", v)
    if proc.wait() != 0:
        sys.exit(f"pmdumplog failed on {archive}")
    print(f"{name}: {rows} values")


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: store_replay_dump.py OUTDIR ARCHIVE...")
    os.makedirs(sys.argv[1], exist_ok=True)
    for a in sys.argv[2:]:
        dump(a, sys.argv[1])


if __name__ == "__main__":
    main()
