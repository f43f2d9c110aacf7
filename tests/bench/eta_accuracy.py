#!/usr/bin/env python3
"""How good was the step log's ETA? Reads the log of a finished `orbis run` and compares, at
every step line, the ETA printed there with the time that really remained (the last step
line's clock minus this line's). Prints the worst relative error from a given fraction of the
run on (default 10%, the issue's bar: within 25%) and a few sample lines.

    eta_accuracy.py RUN.log [--from=0.1]
"""
import re
import sys


def seconds(text):
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    if not m or text in ("", "?"):
        return None
    h, mi, s = (int(g) if g else 0 for g in m.groups())
    return 3600 * h + 60 * mi + s


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    start = 0.1
    for a in sys.argv[1:]:
        if a.startswith("--from="):
            start = float(a.split("=", 1)[1])
    if len(args) != 1:
        sys.exit(__doc__)
    rows = []
    line_re = re.compile(r"^\[\s*([0-9.]+)s\] step\s+(\d+) .*\| ETA (\S+)\s*$")
    with open(args[0]) as f:
        for line in f:
            m = line_re.match(line)
            if m:
                rows.append((float(m.group(1)), int(m.group(2)), seconds(m.group(3))))
    if len(rows) < 2:
        sys.exit(f"{args[0]}: fewer than two step lines with an ETA")
    t0, t_end = rows[0][0], rows[-1][0]
    worst, worst_row = 0.0, None
    samples = []
    for t, step, eta in rows:
        frac = (t - t0) / (t_end - t0)
        if frac < start or eta is None:
            continue
        true = t_end - t
        if true < 30:   # the last half minute: the ETA's 1 s resolution dominates
            continue
        err = (eta - true) / true
        if abs(err) > abs(worst):
            worst, worst_row = err, (t, step, eta, true, frac)
        samples.append((frac, step, eta, true, err))
    print(f"{args[0]}: {len(rows)} step lines, {t_end - t0:.0f} s from the first to the last")
    print(" done   step   ETA(s)  true(s)  error")
    for k in range(0, len(samples), max(1, len(samples) // 10)):
        frac, step, eta, true, err = samples[k]
        print(f"{100 * frac:4.0f}%  {step:5d}  {eta:7.0f}  {true:7.0f}  {100 * err:+6.1f}%")
    if worst_row:
        t, step, eta, true, frac = worst_row
        print(f"worst from {100 * start:.0f}% on: {100 * worst:+.1f}% at step {step} ({100 * frac:.0f}% done: "
              f"ETA {eta} s, {true:.0f} s remained)")


if __name__ == "__main__":
    main()
