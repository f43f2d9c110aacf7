#!/usr/bin/env python3
"""Convergence study of the time-step parameters ([time] eta, max_dln_a, pm_rms_displacement):
z = 0 power spectrum and FoF mass function of hierarchical runs against a reference with 4x
finer global steps (stepping = "global", max_dln_a 0.00625 and eta 0.0125: 1/4 and 1/16 of the
earlier defaults 0.025 and 0.2; the criterion's step is linear in eta, so the steps are 4x finer
where the cap sets them and 16x finer where the criterion does), versus the force evaluations
(full-step equivalents) and the wall time. The study chose today's defaults, eta 0.3 and
max_dln_a 0.05 (the h_eta0.3_max0.05 row).

Two parts, so that the runs can go where the time is (a GPU machine) and the comparison where
numpy is not needed either (plain Python):

    step_convergence.py run ORBIS OUTDIR [--sizes=64,128] [--only=NAME,...] [--set=key=value ...]
        runs every configuration (params/demo.toml's cosmology and ICs; 64^3 in 100 Mpc/h and
        128^3 in 200 Mpc/h, both from z = 49, one output at z = 0, no snapshots) into
        OUTDIR/<size>_<name>/ with its log in OUTDIR/<size>_<name>.log; extra --set values go
        to every run (e.g. gpu.p2p_precision=double, so that float rounding of the P2P sums
        does not hide the time-step error).
    step_convergence.py report OUTDIR [--ref=NAME]
        prints a Markdown table: per run the sync points, full-step equivalents, wall seconds,
        max |P/P_ref - 1| for k <= 1 and k <= 2 h/Mpc, FoF groups, and the largest
        |N - N_ref| / sqrt(N_ref) over the mass function's bins (Poisson: ~1-2 is noise);
        the reference is the run NAME (default "ref").
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PARAMS = os.path.join(HERE, "..", "..", "params", "demo.toml")
BOXES = {64: 100.0, 128: 200.0}   # same mass resolution

# name: [time] overrides (every run names all the step settings, so that the table does not
# change with the defaults). "ref" is the reference; "global" the global step at the earlier
# defaults; the rest are hierarchical.
CONFIGS = {
    "ref": {"stepping": "global", "max_dln_a": 0.00625, "eta": 0.0125},
    # 4x finer than the earlier defaults in both (the 32^3 test's reference; at 128^3 the
    # "ref" above costs ~4x more)
    "ref_eta0.05": {"stepping": "global", "max_dln_a": 0.00625, "eta": 0.05},
    "global": {"stepping": "global", "max_dln_a": 0.025, "eta": 0.2},
    "h_eta0.2_max0.025": {"max_dln_a": 0.025, "eta": 0.2},
    "h_eta0.1_max0.025": {"eta": 0.1, "max_dln_a": 0.025},
    "h_eta0.2_max0.05": {"eta": 0.2, "max_dln_a": 0.05},
    "h_eta0.3_max0.05": {"eta": 0.3, "max_dln_a": 0.05},
    "h_eta0.2_max0.05_rms0.5": {"eta": 0.2, "max_dln_a": 0.05, "pm_rms_displacement": 0.5},
    "h_eta0.2_max0.1": {"eta": 0.2, "max_dln_a": 0.1},
    "h_eta0.2_max0.1_rms0.5": {"eta": 0.2, "max_dln_a": 0.1, "pm_rms_displacement": 0.5},
}


def run(orbis, outdir, sizes, only, extra):
    os.makedirs(outdir, exist_ok=True)
    for size in sizes:
        for name, time in CONFIGS.items():
            if only and name not in only:
                continue
            tag = f"{size}_{name}"
            sets = [f"box.particles_per_side={size}", f"box.size_mpc_h={BOXES[size]}",
                    "time.output_redshifts=[0.0]", "output.snapshots=false",
                    f"output.directory={os.path.join(outdir, tag)}"]
            sets += [f"time.{k}={v if not isinstance(v, str) else chr(34) + v + chr(34)}" for k, v in time.items()]
            sets += extra
            cmd = [orbis, "run", PARAMS, "--overwrite"] + [x for s in sets for x in ("--set", s)]
            with open(os.path.join(outdir, tag + ".log"), "w") as log:
                rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
            print(f"{tag}: exit {rc}", flush=True)


def read_pk(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                k, p = (float(x) for x in line.split()[:2])
                rows.append((k, p))
    return rows


def read_massfn(path):
    counts = []
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                counts.append(int(line.split()[3]))
    return counts


def summary(log):
    text = open(log).read()
    m = re.search(r"finished: (\d+) steps to z = \S+ in ([0-9.]+) s; \S+ particle-steps \((\d+) full-step", text)
    return (int(m.group(1)), int(m.group(3)), float(m.group(2))) if m else None


def report(outdir, ref_name):
    print("| particles | run | sync points | full-step equivalents | wall s | max ΔP/P k ≤ 1 | k ≤ 2 | FoF groups | "
          "max ΔN/√N_ref |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for size in BOXES:
        ref = os.path.join(outdir, f"{size}_{ref_name}")
        if not os.path.exists(os.path.join(ref, "powerspec_000.txt")):
            continue
        pk_ref = read_pk(os.path.join(ref, "powerspec_000.txt"))
        mf_ref = read_massfn(os.path.join(ref, "fof_tab_000_massfn.txt"))
        for name in CONFIGS:
            tag = os.path.join(outdir, f"{size}_{name}")
            s = summary(tag + ".log") if os.path.exists(tag + ".log") else None
            if s is None or not os.path.exists(os.path.join(tag, "powerspec_000.txt")):
                continue
            pk = read_pk(os.path.join(tag, "powerspec_000.txt"))
            worst = {1.0: 0.0, 2.0: 0.0}
            for (k, p), (_, p_ref) in zip(pk, pk_ref):
                for kmax in worst:
                    if k <= kmax:
                        worst[kmax] = max(worst[kmax], abs(p / p_ref - 1))
            mf = read_massfn(os.path.join(tag, "fof_tab_000_massfn.txt"))
            dn = max((abs(n - r) / r ** 0.5 for n, r in zip(mf, mf_ref) if r > 0), default=0.0)
            print(f"| {size}³ | {name} | {s[0]} | {s[1]} | {s[2]:.1f} | {100 * worst[1.0]:.2f}% | "
                  f"{100 * worst[2.0]:.2f}% | {sum(mf)} | {dn:.2f} |")


def main():
    a = sys.argv[1:]
    opts = {x.split("=", 1)[0]: x.split("=", 1)[1] for x in a if x.startswith("--") and "=" in x and not x.startswith("--set=")}
    extra = [x.split("=", 1)[1] for x in a if x.startswith("--set=")]
    pos = [x for x in a if not x.startswith("--")]
    if len(pos) == 3 and pos[0] == "run":
        sizes = [int(s) for s in opts.get("--sizes", "64,128").split(",")]
        only = opts["--only"].split(",") if "--only" in opts else None
        run(pos[1], pos[2], sizes, only, extra)
    elif len(pos) == 2 and pos[0] == "report":
        report(pos[1], opts.get("--ref", "ref"))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
