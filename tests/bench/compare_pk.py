#!/usr/bin/env python3
"""Two runs' power spectra side by side: |P_A/P_B - 1| per k bin and its largest value for
k <= 1 and k <= 2 h/Mpc (orbis powerspec_NNN.txt files of the same output of two runs from
the same ICs, e.g. time.stepping = "hierarchical" against "global").

    compare_pk.py A/powerspec_003.txt B/powerspec_003.txt
"""
import sys


def read(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            k, p = (float(x) for x in line.split()[:2])
            rows.append((k, p))
    return rows


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = read(sys.argv[1]), read(sys.argv[2])
    if [round(k, 6) for k, _ in a] != [round(k, 6) for k, _ in b]:
        sys.exit("the two files have different k bins")
    worst = {1.0: 0.0, 2.0: 0.0}
    for (k, pa), (_, pb) in zip(a, b):
        d = pa / pb - 1
        for kmax in worst:
            if k <= kmax:
                worst[kmax] = max(worst[kmax], abs(d))
    for kmax, w in worst.items():
        print(f"max |P_A/P_B - 1| for k <= {kmax:g} h/Mpc: {100 * w:.2f}%")


if __name__ == "__main__":
    main()
