#!/usr/bin/env python3
"""The report half of bench/sweep: medians and spreads of the runs as CSV and JSON, one
gnuplot PNG and SVG per figure, and the table printed on stdout (beside the 1994 figures
with --reference). Every file is written under a temporary name and renamed when whole."""
import argparse
import csv
import io
import json
import os
import statistics
import subprocess
import sys
import textwrap

from benchreport import read_runs, write_atomic

XLABELS = {
    "sweep": "message size (bytes, log scale)",
    "blast": "blast/sink message size (bytes, log scale)",
    "ttcp": "ttcp -l write size (bytes, log scale)",
    "ftp": "file size (bytes, log scale)",
}
SUBTITLES = {
    "blast": "blast/sink: today's link against HIPPI-PH (Table 1, 1994)",
    "ttcp": "ttcp -s memory to memory: today against HIPPI TCP/IP (Table 2, 1994)",
    "ftp": "file copies disk to disk: ttcp -l BUF today against ftp (Tables 4-6, 1994)",
}


def human(n):
    for shift, unit in ((30, "G"), (20, "M"), (10, "K")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def load_runs(path):
    """{figure: {series: {size: [MB/s, ...]}}}, series and sizes in first-seen order."""
    figures = {}
    for (fig, series, size, _run), value in read_runs(path, "sweep", 5):
        figures.setdefault(fig, {}).setdefault(series, {}).setdefault(int(size), []).append(value)
    return figures


def load_reference(path):
    """{figure: {series: {size: MB/s}}} from hippi-1994.csv."""
    ref = {}
    with open(path) as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        for row in rows:
            ref.setdefault(row["figure"], {}).setdefault(row["series"], {})[
                int(row["size_bytes"])] = float(row["MB_per_s"])
    return ref


def gq(text):
    """text inside a gnuplot single-quoted string."""
    return text.replace("'", "''")


def summary(values):
    return statistics.median(values), min(values), max(values)


def gnuplot_script(fig, title, measured, reference, datadir, out_base):
    """The plot: log x, median lines with min-max bars, the 1994 lines dashed."""
    all_values = [v for s in measured.values() for vs in s.values() for v in vs]
    all_values += [v for s in reference.values() for v in s.values()]
    positive = [v for v in all_values if v > 0]
    logy = positive and max(positive) / min(positive) > 100
    sizes = sorted({x for s in list(measured.values()) + list(reference.values()) for x in s})
    powers = [x for x in sizes if x & (x - 1) == 0]
    tics = ", ".join(f'"{human(x)}" {x}' for x in (powers if len(powers) >= 3 else sizes))
    plots = []
    for i, name in enumerate(measured):
        plots.append(f"'{datadir}/{fig}-m{i}.dat' using 1:2:3:4 with yerrorlines "
                     f"title '{gq(name)}' lw 2 pt 7 ps 0.8 lc {i + 1}")
    # The paper's lines take the colour of today's line in the same place (-2 and its
    # forking blast, ttcp -D and -D, the same ftp buffer), dashed, then dotted.
    for i, name in enumerate(reference):
        colour = i % len(measured) + 1 if measured else i + 1
        dash = 2 if not measured or i < len(measured) else 3
        plots.append(f"'{datadir}/{fig}-r{i}.dat' using 1:2 with linespoints "
                     f"title '{gq(name)}' lw 1.5 dt {dash} pt 6 lc {colour}")
    heading = title if fig == "sweep" else f"{SUBTITLES.get(fig, fig)}\\n{title}"
    common = f"""set termoption noenhanced
set title "{heading.replace('"', "'")}"
set xlabel "{XLABELS.get(fig, XLABELS['sweep'])}"
set ylabel "throughput, receive side (MB/s = 10^6 bytes/s{', log scale' if logy else ''})"
set logscale x 2
{'set logscale y 10' if logy else 'set yrange [0:*]'}
set format y "%g"
set xtics ({tics})
set grid xtics ytics mytics lc rgb "#d0d0d0"
set key below center horizontal nobox spacing 1.2 width 2
set bars small
set offsets graph 0.02, graph 0.02, 0, 0
"""
    plot = "plot " + ", \\\n     ".join(plots) + "\n"
    return (f"set terminal pngcairo noenhanced size 1280,720 font 'DejaVu Sans,11'\n"
            f"set output '{out_base}.png'\n{common}{plot}"
            f"set terminal svg noenhanced size 1280,720 dynamic font 'DejaVu Sans,11'\n"
            f"set output '{out_base}.svg'\n{plot}")


def print_table(fig, measured, reference):
    cols = [(name, {x: summary(v) for x, v in s.items()}) for name, s in measured.items()]
    cols += [(name, {x: (v, None, None) for x, v in s.items()}) for name, s in reference.items()]
    sizes = sorted({x for _, c in cols for x in c})
    width = 17
    print(f"\n{SUBTITLES.get(fig, 'sweep')}: MB/s (10^6 B/s), median and min-max of the runs")
    heads = [textwrap.wrap(name, width) for name, _ in cols]
    depth = max(len(h) for h in heads)
    for line in range(depth):
        words = [h[line - depth + len(h)] if line >= depth - len(h) else "" for h in heads]
        print(f"{'size' if line == depth - 1 else '':>6} "
              + " ".join(f"{w:>{width}}" for w in words))
    for x in sizes:
        cells = []
        for _, c in cols:
            if x not in c:
                cells.append(f"{'-':>{width}}")
            elif c[x][1] is None:
                cells.append(f"{c[x][0]:>{width}.2f}")
            else:
                med, lo, hi = c[x]
                cells.append(f"{med:>8.1f} {f'{lo:.0f}-{hi:.0f}':>8}"[-width:].rjust(width))
        print(f"{human(x):>6} " + " ".join(cells))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", required=True)
    ap.add_argument("--figures", required=True)
    ap.add_argument("--seconds", required=True)
    ap.add_argument("--host", required=True)
    ap.add_argument("--reference")
    a = ap.parse_args()
    runs = load_runs(a.runs)
    ref = load_reference(a.reference) if a.reference else {}
    figures = [f for f in a.figures.split() if f in runs]
    if not figures:
        sys.exit("sweep: no run produced a figure")

    raw = io.StringIO()
    w = csv.writer(raw, lineterminator="\n")
    w.writerow(["figure", "series", "size_bytes", "run", "MB_per_s"])
    table = io.StringIO()
    t = csv.writer(table, lineterminator="\n")
    t.writerow(["figure", "series", "source", "size_bytes", "runs", "median_MB_per_s",
                "min_MB_per_s", "max_MB_per_s"])
    doc = {"title": a.title, "host": a.host, "seconds_per_run": float(a.seconds),
           "unit": "MB/s = 10^6 bytes/s, receive side", "figures": []}
    datadir = os.path.join(a.out, "data")
    os.makedirs(datadir, exist_ok=True)
    for fig in figures:
        measured, reference = runs[fig], ref.get(fig, {})
        entry = {"name": fig, "x": XLABELS.get(fig, XLABELS["sweep"]), "series": []}
        for i, (name, points) in enumerate(measured.items()):
            lines, jpoints = [], []
            for x in sorted(points):
                med, lo, hi = summary(points[x])
                for r, v in enumerate(points[x], 1):
                    w.writerow([fig, name, x, r, f"{v:.3f}"])
                t.writerow([fig, name, "measured", x, len(points[x]), f"{med:.3f}", f"{lo:.3f}",
                            f"{hi:.3f}"])
                lines.append(f"{x} {med} {lo} {hi}\n")
                jpoints.append({"size_bytes": x, "runs": points[x], "median": med, "min": lo,
                                "max": hi})
            write_atomic(f"{datadir}/{fig}-m{i}.dat", "".join(lines))
            entry["series"].append({"name": name, "source": "measured", "points": jpoints})
        for i, (name, points) in enumerate(reference.items()):
            lines = [f"{x} {points[x]}\n" for x in sorted(points)]
            for x in sorted(points):
                t.writerow([fig, name, "1994", x, 1, f"{points[x]:.3f}", f"{points[x]:.3f}",
                            f"{points[x]:.3f}"])
            write_atomic(f"{datadir}/{fig}-r{i}.dat", "".join(lines))
            entry["series"].append({"name": name, "source": "SGI, HIPPI Performance on IRIX 5.2 (1994)",
                                    "points": [{"size_bytes": x, "median": points[x]}
                                               for x in sorted(points)]})
        doc["figures"].append(entry)
        base = os.path.join(a.out, fig)
        script = gnuplot_script(fig, a.title, measured, reference, datadir, base + ".tmp")
        write_atomic(f"{datadir}/{fig}.gp", script)
        done = subprocess.run(["gnuplot", f"{datadir}/{fig}.gp"], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"sweep: gnuplot failed on {fig}: {done.stderr.strip().splitlines()[-1:]}")
        for ext in ("png", "svg"):
            os.replace(f"{base}.tmp.{ext}", f"{base}.{ext}")
        print_table(fig, measured, reference)
    write_atomic(os.path.join(a.out, "runs.csv"), raw.getvalue())
    write_atomic(os.path.join(a.out, "sweep.csv"), table.getvalue())
    write_atomic(os.path.join(a.out, "sweep.json"), json.dumps(doc, indent=1) + "\n")
    print(f"\nwrote {a.out}/: sweep.csv sweep.json runs.csv "
          + " ".join(f"{f}.png {f}.svg" for f in figures))


if __name__ == "__main__":
    main()
