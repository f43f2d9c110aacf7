#!/usr/bin/env python3
"""The per-phase table of orbis run logs (rank 0's step lines), for tests/bench/ranks_stretch.sh.

    tests/bench/ranks_table.py LOG...

Each step line ("step N a ... | X s: phase t phase t ... io t | ...") is split into PM steps
(those with a "pm" phase) and sub-steps; the table gives, per log, the steps, the seconds of
each kind, the energy checks' seconds and the sum of every phase over the run, then the wall time of the whole command
from the log's last "run loop" or "finished" line when there is one.
"""
import re
import sys

ENERGY = re.compile(r"energy check at a = .*\(([0-9.]+) s\)\s*$")
STEP = re.compile(r"step\s+\d+ a [0-9.]+ .*?\|\s*([0-9.]+) s:((?: [a-z_0-9]+ [0-9.]+)+)")


def parse(path):
    pm_steps, sub_steps, phases, energy = [], [], {}, []
    tail = ""
    with open(path, errors="replace") as f:
        for line in f:
            m = STEP.search(line)
            if m:
                seconds = float(m.group(1))
                words = m.group(2).split()
                step_phases = {words[i]: float(words[i + 1]) for i in range(0, len(words), 2)}
                (pm_steps if "pm" in step_phases else sub_steps).append(seconds)
                for k, v in step_phases.items():
                    phases[k] = phases.get(k, 0.0) + v
            elif ENERGY.search(line):
                energy.append(float(ENERGY.search(line).group(1)))
            elif "run loop" in line or "finished" in line:
                tail = line.strip()
    return pm_steps, sub_steps, phases, energy, tail


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rows = [(p, *parse(p)) for p in sys.argv[1:]]
    names = sorted({k for r in rows for k in r[3]}, key=lambda k: -max(r[3].get(k, 0) for r in rows))
    print("| log | steps (PM) | steps s | PM steps s | sub-steps s | energy checks s (n) | " + " | ".join(names) + " |")
    print("| --- " * (6 + len(names)) + "|")
    for path, pm, sub, phases, energy, _ in rows:
        cells = [path, f"{len(pm) + len(sub)} ({len(pm)})", f"{sum(pm) + sum(sub):.2f}", f"{sum(pm):.2f}",
                 f"{sum(sub):.2f}", f"{sum(energy):.2f} ({len(energy)})"] + [f"{phases.get(k, 0):.2f}" for k in names]
        print("| " + " | ".join(cells) + " |")
    for path, *_, tail in rows:
        if tail:
            print(f"{path}: {tail[:200]}")


if __name__ == "__main__":
    main()
