#!/usr/bin/env python3
"""The force-split study's table (docs/force_split.md): every run of force_split_study.sh
against a reference run of the same ICs, per output: the mean P/P_ref - 1 over the linear
bins (k < 0.2 h/Mpc) and over 0.3 <= k <= 1 h/Mpc, and the largest |P/P_ref - 1| for
k <= 1 h/Mpc; and the wall time and the full-step equivalents from each run's log.

    force_split_report.py RUNS_DIR REFERENCE_NAME [NAME...]

RUNS_DIR holds one folder per run (the unpacked force_split_runs.tgz); without NAMEs every
folder is reported. Needs numpy.
"""
import glob
import os
import re
import sys

import numpy as np


def read_pk(path):
    k, p = np.loadtxt(path, comments="#", usecols=(0, 1), unpack=True)
    return k, p


def outputs(run):
    return sorted(glob.glob(os.path.join(run, "powerspec_[0-9][0-9][0-9].txt")))


def redshift(path):
    with open(path) as f:
        head = "".join(f.readline() for _ in range(3))
    m = re.search(r"z\s*=\s*([-0-9.eE+]+)", head)
    return float(m.group(1)) if m else float("nan")


def log_summary(run):
    """(wall seconds, full-step equivalents) from the run's log and time.txt."""
    wall = feq = float("nan")
    try:
        text = open(os.path.join(run, "time.txt")).read()
        m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", text)
        if m:
            wall = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
        log = open(os.path.join(run, "run.log")).read()
        m = re.findall(r"([\d.]+) full-step equivalents", log)
        if m:
            feq = float(m[-1])
    except OSError:
        pass
    return wall, feq


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    root, ref = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    ref_files = outputs(os.path.join(root, ref))
    if not ref_files:
        sys.exit(f"no powerspec files in {os.path.join(root, ref)}")
    zs = [redshift(f) for f in ref_files]
    head = " | ".join(f"z={z:g} lin / 0.3-1 / max" for z in zs)
    print(f"reference: {ref}\n| run | wall s | full-step eq. | {head} |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in zs) + " |")
    for name in names:
        run = os.path.join(root, name)
        files = outputs(run)
        wall, feq = log_summary(run)
        cells = []
        for f_ref in ref_files:
            f = os.path.join(run, os.path.basename(f_ref))
            if not os.path.exists(f):
                cells.append("—")
                continue
            k, p = read_pk(f)
            k_r, p_r = read_pk(f_ref)
            if len(k) != len(k_r) or np.max(np.abs(k / k_r - 1)) > 1e-6:
                cells.append("bins differ")
                continue
            d = p / p_r - 1
            lin = d[k < 0.2].mean()
            mid = d[(k >= 0.3) & (k <= 1.0)].mean()
            worst = np.abs(d[k <= 1.0]).max()
            cells.append(f"{100 * lin:+.3f}% / {100 * mid:+.3f}% / {100 * worst:.3f}%")
        print(f"| {name} | {wall:.1f} | {feq:.0f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
