#!/usr/bin/env python3
"""How good is the step log's ETA? Reads the log of a finished `orbis run` and compares, at
every step line, the ETA with the time that really remained (the last step line's clock minus
this line's). Prints the error at 10, 25, 50 and 75% of the run and the worst one from a given
fraction on (default 10%, the issue's bar: within 25%), skipping the last --min-left seconds
(default 30: there the ETA's 1 s resolution dominates).

    eta_accuracy.py RUN.log [--from=0.1] [--min-left=30] [--replay [--output-estimate=SECONDS]]

--replay recomputes the ETA from the log's own step lines with the model of
src/integrate/cost_model.cpp (a replica: keep the two in step), so that a log written by an
older orbis tells how the current model would have done on the same run. The output cost
before the first output is then --output-estimate (the run computes it as the output's bytes
at 200 MB/s plus 0.15 us per particle); the default takes the first output's measured cost.
"""
import math
import re
import sys

MAX_COST_GROWTH = 0.5   # cost_model.hpp: kMaxCostGrowth

STEP = re.compile(r"^\[\s*([0-9.]+)s\] step\s+(\d+) a ([0-9.]+) .*?\| active (\d+) bins \S+ \| ([0-9.]+) s:.*? io "
                  r"([0-9.]+) .*\| ETA (\S+)")


def seconds(text):
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    if not m or text in ("", "?"):
        return None
    h, mi, s = (int(g) if g else 0 for g in m.groups())
    return 3600 * h + 60 * mi + s


def read_log(path):
    rows, a_begin, z_out, z_final = [], None, [], 0.0
    with open(path) as f:
        for line in f:
            m = STEP.match(line)
            if m:
                rows.append(dict(t=float(m.group(1)), step=int(m.group(2)), a=float(m.group(3)),
                                 seconds=float(m.group(5)), io=float(m.group(6)), eta=seconds(m.group(7)),
                                 pm_end="|sum p|" in line))
                continue
            m = re.search(r"run from a = ([0-9.e+-]+)", line)
            if m:
                a_begin = float(m.group(1))
            m = re.search(r"time\.output_redshifts = \[(.*)\]", line)
            if m:
                z_out = [float(z) for z in m.group(1).split(",") if z.strip()]
            m = re.search(r"time\.z_final = ([0-9.e+-]+)", line)
            if m:
                z_final = float(m.group(1))
    return rows, a_begin, sorted(1 / (1 + z) for z in z_out), 1 / (1 + z_final)


def replay(rows, a_begin, a_outputs, a_end, output_estimate):
    """cost_model.cpp's prediction at every step line."""
    history, start, step_seconds, outputs = [], math.log(a_begin), 0.0, []
    if output_estimate is None:
        output_estimate = next((r["io"] for r in rows if r["io"] > 0.05), 0.0)
    for r in rows:
        step_seconds += r["seconds"] - r["io"]
        if r["io"] > 0.05:
            outputs.append(r["io"])
        ln_a = math.log(r["a"])
        if r["pm_end"]:
            history.append((start, ln_a - start, step_seconds))
            start, step_seconds = ln_a, 0.0
        if not history:
            r["model"] = None
            continue
        cut = ln_a - 0.5 * (ln_a - history[0][0])
        begin = len(history)
        while begin > 0 and history[begin - 1][0] >= cut:
            begin -= 1
        begin = min(begin, max(0, len(history) - 3))
        window = history[begin:]
        xs = [x + 0.5 * d for x, d, _ in window]
        ys = [math.log(s / d) for _, d, s in window]
        n = len(window)
        sx, sy = sum(xs), sum(ys)
        den = n * sum(x * x for x in xs) - sx * sx
        beta = min(max((n * sum(x * y for x, y in zip(xs, ys)) - sx * sy) / den, 0.0), MAX_COST_GROWTH) if den > 0 else 0
        rate = sum(s for _, _, s in window) / sum(d for _, d, _ in window) * math.exp(beta * (ln_a - sx / n))
        left = max(0.0, math.log(a_end) - ln_a)
        steps = rate * (math.expm1(beta * left) / beta if beta * left > 1e-9 else left)
        remaining = sum(1 for a in a_outputs if a > r["a"] * (1 + 1e-9))
        each = sum(outputs) / len(outputs) if outputs else output_estimate
        r["model"] = steps + remaining * each


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "") for a in sys.argv[1:] if a.startswith("--"))
    if len(args) != 1:
        sys.exit(__doc__)
    start = float(opts.get("from", 0.1))
    min_left = float(opts.get("min-left", 30))
    rows, a_begin, a_outputs, a_end = read_log(args[0])
    if len(rows) < 2:
        sys.exit(f"{args[0]}: fewer than two step lines with an ETA")
    key = "eta"
    if "replay" in opts:
        if a_begin is None:
            sys.exit(f"{args[0]}: no 'run from a = ...' line to replay from")
        est = float(opts["output-estimate"]) if "output-estimate" in opts else None
        replay(rows, a_begin, a_outputs, a_end, est)
        key = "model"
    t0, t_end = rows[0]["t"] - rows[0]["seconds"], rows[-1]["t"]
    print(f"{args[0]}: {len(rows)} step lines, {t_end - t0:.0f} s of steps and outputs; "
          f"{'replayed with cost_model.cpp' if key == 'model' else 'the ETA the run printed'}")
    print(" done   step   ETA(s)  true(s)  error")
    worst, marks = None, [0.1, 0.25, 0.5, 0.75]
    for r in rows:
        frac, true, eta = (r["t"] - t0) / (t_end - t0), t_end - r["t"], r[key]
        if eta is None or true <= 0:
            continue
        err = (eta - true) / true
        if marks and frac >= marks[0]:
            print(f"{100 * frac:4.0f}%  {r['step']:5d}  {eta:7.0f}  {true:7.0f}  {100 * err:+6.1f}%")
            marks.pop(0)
        if true < min_left:
            continue
        if frac >= start and (worst is None or abs(err) > abs(worst[0])):
            worst = (err, r["step"], eta, true, frac)
    if worst:
        err, step, eta, true, frac = worst
        print(f"worst from {100 * start:.0f}% on: {100 * err:+.1f}% at step {step} ({100 * frac:.0f}% done: "
              f"ETA {eta:.0f} s, {true:.0f} s remained)")


if __name__ == "__main__":
    main()
