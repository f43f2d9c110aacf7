#!/usr/bin/env python3
"""The headline benchmark's table from a run's log (tests/bench/headline.sh writes RUN_DIR/run.log
and RUN_DIR/time.txt): the hardware, the wall time (/usr/bin/time), the time per phase summed
over every step line (kdk, m2l, p2p, pm, tree, walk, io: what the step waited for), the ICs,
the outputs (their own time, on a host thread beside the steps, and what the run waited for at
its end), the steps, force evaluations and particle-steps per second.

    headline_table.py RUN_DIR [--commit HASH]

Markdown on stdout. Standard library only.
"""
import argparse
import os
import re
import sys

PHASES = ("kdk", "m2l", "p2p", "pm", "tree", "walk", "io")


def fail(message):
    print(f"headline_table.py: {message}", file=sys.stderr)
    sys.exit(2)


def parse(run_dir):
    log_path = os.path.join(run_dir, "run.log")
    if not os.path.exists(log_path):
        fail(f"{log_path}: missing")
    phases = dict.fromkeys(PHASES, 0.0)
    r = {"steps": 0, "outputs": [], "wait": 0.0, "device": "?", "threads": "?"}
    step_re = re.compile(r"\] step +(\d+) .*?\| ([0-9.]+) s: (.*?) \| .*?evals ([0-9.e+]+) \(([0-9.]+) full\)")
    for line in open(log_path, errors="replace"):
        m = step_re.search(line)
        if m:
            r["steps"] = int(m.group(1))
            for name, value in re.findall(r"(\w+) ([0-9.]+)", m.group(3)):
                if name in phases:
                    phases[name] += float(value)
            r["evals"], r["full"] = float(m.group(4)), float(m.group(5))
            d = re.search(r"on cuda \(([^,]+),", line)
            if d:
                r["device"] = d.group(1)
            continue
        if m := re.search(r"\| (\d+) rank x (\d+) threads", line):
            r["threads"] = m.group(2)
        if m := re.search(r"ICs: time per phase: (.*)", line):
            r["ics_detail"] = m.group(1)
        if m := re.search(r"^\[ *([0-9.]+)s\] run from a", line):
            r["run_start"] = float(m.group(1))
        if m := re.search(r"output (\d+) written in ([0-9.]+) s: snapshot ([0-9.]+) s, P\(k\) ([0-9.]+) s, "
                          r"FoF catalogue ([0-9.]+) s", line):
            r["outputs"].append(tuple(float(x) for x in m.groups()))
        if m := re.search(r"waited ([0-9.]+) s for the last output", line):
            r["wait"] = float(m.group(1))
        if m := re.search(r"(finished|stopped): (\d+) steps .* in ([0-9.]+) s; ([0-9.e+]+) particle-steps", line):
            r["loop_seconds"], r["particle_steps"] = float(m.group(3)), float(m.group(4))
        if m := re.search(r"^\[ *([0-9.]+)s\]", line):
            r["last_stamp"] = float(m.group(1))
    if "loop_seconds" not in r:
        fail(f"{log_path}: the run did not finish")
    r["phases"] = phases
    time_path = os.path.join(run_dir, "time.txt")
    if os.path.exists(time_path):
        for line in open(time_path):
            if m := re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([0-9.]+)", line):
                h, mnt, s = m.groups()   # a run in restarted pieces: one line per piece
                r["wall"] = r.get("wall", 0) + (int(h or 0) * 60 + int(mnt)) * 60 + float(s)
                r["pieces"] = r.get("pieces", 0) + 1
            if m := re.search(r"Maximum resident set size \(kbytes\): (\d+)", line):
                r["rss_gib"] = int(m.group(1)) / 2**20
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--commit", default="?")
    args = ap.parse_args()
    r = parse(args.run_dir)
    ph = r["phases"]
    steps_sum = sum(ph.values())
    print(f"Headline run ({args.run_dir}), commit {args.commit}; {r['device']}, {r['threads']} host threads\n")
    print("| phase | seconds |")
    print("|---|---|")
    if "wall" in r:
        pieces = f", {r['pieces']} restarted pieces" if r["pieces"] > 1 else ""
        print(f"| **time to solution** (wall, /usr/bin/time: start-up, ICs, steps, outputs{pieces}) "
              f"| **{r['wall']:.1f}** |")
    print(f"| start-up and ICs (log time at the first step's start) | {r.get('run_start', 0):.1f} |")
    if "ics_detail" in r:
        print(f"| &nbsp;&nbsp;ICs by phase | {r['ics_detail']} |")
    print(f"| run loop (first step to the end, incl. waiting for the last output; last piece) "
          f"| {r['loop_seconds']:.1f} |")
    for name in PHASES:
        label = {"io": "io (the step's copy of the particles for an output)", "kdk": "kicks and drifts",
                 "p2p": "P2P (GPU)", "m2l": "M2L/L2L/L2P"}.get(name, name)
        print(f"| &nbsp;&nbsp;{label} | {ph[name]:.1f} |")
    print(f"| &nbsp;&nbsp;sum over steps | {steps_sum:.1f} |")
    for i, o in enumerate(r["outputs"]):
        print(f"| output {int(o[0]):03d} on a host thread beside the steps: snapshot {o[2]:.1f}, P(k) {o[3]:.1f}, "
              f"FoF {o[4]:.1f} | ({o[1]:.1f}) |")
    print(f"| waited at the end for the last output | {r['wait']:.1f} |")
    print()
    pss = r["particle_steps"] / r["loop_seconds"] if r.get("pieces", 1) == 1 else float("nan")
    print(f"- steps (sync points): {r['steps']}; force evaluations: {r['evals']:.3g} particle-forces "
          f"({r['full']:.0f} full-step equivalents); particle-steps per second over the run loop: {pss:.3g}")
    if "rss_gib" in r:
        print(f"- peak host memory: {r['rss_gib']:.1f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
