#!/usr/bin/env python3
"""The report half of bench/compare: one table of medians, spreads and ratios (ours / peer)
printed and written as compare.md and compare.json, with the runs as runs.csv, what could
not run and why, and the attached scripts' own tables. Files appear whole (temp + rename)."""
import argparse
import json
import os
import statistics

from benchreport import read_runs, write_atomic

GROUPS = {
    "ttcp": "TCP, loopback",
    "blast": "raw, veth pair",
    "stripe-write": "disk write",
    "stripe-read": "disk read",
}
WHERE = [
    "TCP, loopback: 1 MiB writes, memory to memory.",
    "raw, veth pair: two network namespaces joined by a veth pair, MTU 65000; iperf3 is TCP "
    "over the same pair.",
    "disk write/read: sequential, O_DIRECT, one file in one directory (-d).",
]
OURS = ("ttcp", "blast", "stripe")
NOTES = {
    "NPtcp 1 MiB ping-pong": "NetPIPE ping-pong: one message in flight each way",
    "trafgen 64000-byte frames": "no receiver: bytes the veth delivered, no flow control",
    "iperf3 -l 1M": "",
}


def load(path):
    groups = {}
    for (group, tool, _run), value in read_runs(path, "compare", 4):
        groups.setdefault(group, {}).setdefault(tool, []).append(value)
    return groups


def spread(values):
    return f"{min(values):.0f}-{max(values):.0f}"


def main():
    ap = argparse.ArgumentParser()
    for name in ("runs", "skipped", "attached", "out", "title", "runs-per-tool", "seconds",
                 "file-mib"):
        ap.add_argument(f"--{name}", required=True)
    a = ap.parse_args()
    groups = load(a.runs)
    rows = []
    for group, tools in groups.items():
        ours = next((t for t in tools if t.startswith(OURS)), None)
        if ours is None:
            continue
        mine = statistics.median(tools[ours])
        for peer, values in tools.items():
            if peer == ours:
                continue
            theirs = statistics.median(values)
            rows.append({
                "group": group, "what": GROUPS.get(group, group),
                "ours": ours, "ours_median": mine, "ours_min": min(tools[ours]),
                "ours_max": max(tools[ours]), "ours_runs": tools[ours],
                "peer": peer, "peer_median": theirs, "peer_min": min(values),
                "peer_max": max(values), "peer_runs": values,
                "ratio": mine / theirs if theirs > 0 else None,
                "note": NOTES.get(peer, ""),
            })
    skipped = []
    with open(a.skipped) as f:
        for line in f:
            what, reason = line.rstrip("\n").split("\t", 1)
            skipped.append({"what": what, "reason": reason})
    attached = {}
    for name in sorted(os.listdir(a.attached)):
        with open(os.path.join(a.attached, name)) as f:
            attached[name.removesuffix(".txt")] = f.read()

    head = ["what", "ours", "MB/s", "min-max", "peer", "MB/s", "min-max", "ours/peer"]
    body = [[r["what"], r["ours"], f"{r['ours_median']:.0f}",
             spread(r["ours_runs"]), r["peer"], f"{r['peer_median']:.0f}",
             spread(r["peer_runs"]), "-" if r["ratio"] is None else f"{r['ratio']:.2f}"]
            for r in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(head, *body)]

    def line(cells):
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"

    table = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    table += [line(r) for r in body]
    intro = (f"{a.title}\n\nMedians of {a.runs_per_tool} alternating runs per tool, "
             f"{a.seconds} s per network run, {a.file_mib} MiB per disk run; MB/s = 10^6 "
             "bytes/s, receive side; ratio = ours / peer (above 1: ours is faster).\n")
    notes = [f"- {r['peer']}: {r['note']}" for r in rows if r["note"]]
    md = [f"# {intro}", *table, "", *[f"- {w}" for w in WHERE], ""]
    if notes:
        md += ["Notes:", "", *dict.fromkeys(notes), ""]
    if skipped:
        md += ["Not run here:", ""] + [f"- {s['what']}: {s['reason']}" for s in skipped] + [""]
    for name, text in attached.items():
        md += [f"## {name}", "", "```", text.rstrip(), "```", ""]
    text = "\n".join(md)
    print(text)
    os.makedirs(a.out, exist_ok=True)
    write_atomic(os.path.join(a.out, "compare.md"), text)
    doc = {"title": a.title, "runs_per_tool": int(a.runs_per_tool),
           "seconds_per_run": float(a.seconds), "file_MiB": int(a.file_mib),
           "unit": "MB/s = 10^6 bytes/s, receive side", "rows": rows,
           "not_run": skipped, "attached": attached}
    write_atomic(os.path.join(a.out, "compare.json"), json.dumps(doc, indent=1) + "\n")
    csv = ["group,tool,run,MB_per_s"]
    for group, tools in groups.items():
        for tool, values in tools.items():
            csv += [f'{group},"{tool}",{i},{v:.3f}' for i, v in enumerate(values, 1)]
    write_atomic(os.path.join(a.out, "runs.csv"), "\n".join(csv) + "\n")
    print(f"wrote {a.out}/: compare.md compare.json runs.csv")


if __name__ == "__main__":
    main()
