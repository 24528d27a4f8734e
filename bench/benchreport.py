"""What bench/sweep's and bench/compare's reports share: the runs file they read and the
way they write a file (temporary name, fsync, rename, so it appears only when whole)."""
import math
import os
import sys


def write_atomic(path, text):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_runs(path, tool, fields):
    """Yields (the first fields - 1 columns, MB/s) of each tab-separated line of a runs
    file, whose last column is a rate; stops the tool on a rate that is not one."""
    with open(path) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) != fields:
                sys.exit(f"{tool}: a runs line has {len(cols)} fields, not {fields}: {line!r}")
            try:
                value = float(cols[-1])
            except ValueError:
                value = math.nan
            if not math.isfinite(value) or value < 0:
                sys.exit(f"{tool}: {' '.join(cols[:-1])} reported '{cols[-1]}'")
            yield cols[:-1], value
