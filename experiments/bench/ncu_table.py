#!/usr/bin/env python3
"""One decode step's kernels as a table, from Nsight Compute's raw CSV
(issue 39, item 4: "one ncu profile of a batch-64 step committed as a
table: kernel, time, bytes, achieved bandwidth").

Input: what `ncu --csv --page raw --print-units base --metrics
gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
--log-file FILE` writes (scripts/gpu-window kprof runs it): a header row
naming the columns ("ID", ..., "Kernel Name", ..., the metrics), a row of
units, then one row a kernel launch; lines before the header (the tool's
"==PROF==" notes) are skipped. Only base units are read (ns, bytes);
anything else is refused with the unit named.

Output (stdout, Markdown): the kernels grouped by name (templates and
arguments cut at the first "(" or "<"), largest total time first: launches,
total and share of the step's GPU time, DRAM bytes read plus written,
achieved GB/s (bytes / time), and the share of a peak when --peak GB/s is
given; then the step's totals. Exit 1 with one line naming the file and
what is wrong when the CSV cannot be read.

Usage: ncu_table.py FILE [--peak GB/s] [--title TEXT]
"""
import argparse
import csv
import sys

TIME, READ, WRITE = "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"
SCALE = {TIME: {"nsecond": 1.0, "ns": 1.0}, READ: {"byte": 1.0}, WRITE: {"byte": 1.0}}


def fail(path, what):
    print(f"ncu_table.py: {path}: {what}", file=sys.stderr)
    sys.exit(1)


def short(name):
    if name.startswith("void "):
        name = name[5:]
    cut = len(name)
    for c in "(<":
        i = name.find(c)
        if i > 0:
            cut = min(cut, i)
    return name[:cut].strip() or name


def read(path):
    try:
        with open(path, newline="") as f:
            lines = f.read().splitlines()
    except OSError as e:
        fail(path, e.strerror)
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        fail(path, 'no header row (a line starting "ID"): not ncu --csv --page raw output')
    rows = list(csv.reader(lines[start:]))
    head = rows[0]
    for col in ("Kernel Name", TIME, READ, WRITE):
        if col not in head:
            fail(path, f"no column '{col}'")
    at = {c: head.index(c) for c in ("ID", "Kernel Name", TIME, READ, WRITE)}
    body = rows[1:]
    units = {}
    if body and body[0][at["ID"]] == "":  # the units row
        for m in (TIME, READ, WRITE):
            u = body[0][at[m]]
            if u not in SCALE[m]:
                fail(path, f"column '{m}' in '{u}': only base units are read (--print-units base)")
            units[m] = SCALE[m][u]
        body = body[1:]
    else:
        units = {TIME: 1.0, READ: 1.0, WRITE: 1.0}
    out = []
    for n, r in enumerate(body, start=start + 3):
        if len(r) < len(head):
            continue  # a trailing note
        vals = {}
        for m in (TIME, READ, WRITE):
            try:
                vals[m] = float(r[at[m]].replace(",", "")) * units[m]
            except ValueError:
                fail(path, f"line {n}: '{m}' is '{r[at[m]]}', not a number")
        out.append((r[at["Kernel Name"]], vals[TIME], vals[READ] + vals[WRITE]))
    if not out:
        fail(path, "no kernel rows (was the step between cudaProfilerStart and Stop?)")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--peak", type=float, default=0.0, help="GB/s the achieved rate is a share of")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    launches = read(a.file)
    groups = {}
    for name, ns, b in launches:
        g = groups.setdefault(short(name), [0, 0.0, 0.0])
        g[0] += 1
        g[1] += ns
        g[2] += b
    total_ns = sum(g[1] for g in groups.values())
    total_b = sum(g[2] for g in groups.values())
    if a.title:
        print(a.title)
        print()
    peak = f" | share of {a.peak:g} GB/s" if a.peak else ""
    print(f"| kernel | launches | time us | share of step | GB moved | GB/s{peak} |")
    print("|---|---:|---:|---:|---:|---:" + ("|---:|" if a.peak else "|"))
    for name, (k, ns, b) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        rate = b / ns if ns > 0 else 0.0  # bytes/ns = GB/s
        extra = f" | {rate / a.peak:.2f}" if a.peak else ""
        print(f"| `{name}` | {k} | {ns / 1e3:,.1f} | {ns / total_ns:.1%} | {b / 1e9:.3f} | "
              f"{rate:,.0f}{extra} |")
    rate = total_b / total_ns if total_ns > 0 else 0.0
    extra = f" | {rate / a.peak:.2f}" if a.peak else ""
    print(f"| **the step** | {len(launches)} | {total_ns / 1e3:,.1f} | 100% | {total_b / 1e9:.3f} | "
          f"{rate:,.0f}{extra} |")


if __name__ == "__main__":
    main()
