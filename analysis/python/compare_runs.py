#!/usr/bin/env python3
"""Compare a run's power spectra and FoF mass functions with a reference run of the same ICs.

Reads powerspec_NNN.txt and fof_tab_NNN_massfn.txt from two run directories (orbis outputs,
matched by output number, which must be at the same scale factor) and prints, for each output:
  - the largest |P/P_ref - 1| for k <= 1 h/Mpc (bar 1%) and up to the particle Nyquist
    wavenumber pi N^(1/3) / L (bar 3%), and the k where it occurs;
  - the FoF mass function: per mass bin, (N - N_ref) / sqrt(N_ref), the difference in units of
    the reference's Poisson error (bar: every bin within 1 sigma), and chi^2 per bin.
Writes a PNG per quantity (P ratio and mass functions) when --plot PREFIX is given. Exit status:
0 when every bar holds, 1 when one fails, 2 on bad input.

    compare_runs.py RUN_DIR REFERENCE_DIR [--label NAME] [--plot PREFIX]

Needs numpy (and matplotlib for --plot).
"""
import argparse
import glob
import math
import os
import re
import sys

import numpy as np

PK_BAR_K1 = 0.01       # |dP/P| for k <= 1 h/Mpc
PK_BAR_NYQUIST = 0.03  # |dP/P| up to the particle Nyquist wavenumber
MASSFN_SIGMA = 1.0     # |N - N_ref| <= this many sqrt(N_ref) in every bin


def fail(message):
    print(f"compare_runs.py: {message}", file=sys.stderr)
    sys.exit(2)


def read_pk(path):
    """(header dict, k, P) of an orbis powerspec_NNN.txt."""
    with open(path) as f:
        header = f.readline()
    if not header.startswith("# k_mean"):
        fail(f"{path}: line 1 is not an orbis P(k) header ('# k_mean ...')")
    meta = {}
    for key in ("a", "box", "N"):
        m = re.search(rf"\b{key} = ([0-9.eE+-]+)", header)
        if not m:
            fail(f"{path}: line 1 has no '{key} = ...'")
        meta[key] = float(m.group(1))
    data = np.loadtxt(path, comments="#", ndmin=2)
    if data.shape[1] < 2:
        fail(f"{path}: expected columns k_mean, P, ...")
    return meta, data[:, 0], data[:, 1]


def read_massfn(path):
    """(a, rows of log10M_lo, log10M_hi, log10M_mid, N_fof) of an orbis mass-function table."""
    with open(path) as f:
        first = f.readline()
    m = re.search(r"\ba = ([0-9.eE+-]+)", first)
    if not m:
        fail(f"{path}: line 1 has no 'a = ...' (not an orbis mass function)")
    with open(path) as f:
        rows = [[float(x) for x in line.split()[:4]] for line in f if line.strip() and not line.startswith("#")]
    return float(m.group(1)), rows


def outputs(run_dir):
    found = sorted(glob.glob(os.path.join(run_dir, "powerspec_[0-9][0-9][0-9].txt")))
    if not found:
        fail(f"{run_dir}: no powerspec_NNN.txt")
    return [os.path.basename(p)[10:13] for p in found]


def compare_pk(path, ref_path):
    meta, k, p = read_pk(path)
    ref_meta, k_ref, p_ref = read_pk(ref_path)
    if abs(meta["a"] - ref_meta["a"]) > 1e-6 * ref_meta["a"] or len(k) != len(k_ref) or \
            not np.allclose(k, k_ref, rtol=1e-6):
        fail(f"{path} and {ref_path}: different scale factors or k bins")
    k_nyquist = math.pi * round(meta["N"] ** (1 / 3)) / meta["box"]
    ratio = p / p_ref - 1
    rows = {}
    for name, k_max in (("k<=1", 1.0), ("k<=k_Ny", k_nyquist)):
        sel = k <= k_max
        i = np.argmax(np.abs(ratio[sel]))
        rows[name] = (float(np.abs(ratio[sel])[i]), float(k[sel][i]))
    return meta["a"], k_nyquist, k, ratio, rows


def compare_massfn(path, ref_path):
    a, rows = read_massfn(path)
    a_ref, rows_ref = read_massfn(ref_path)
    if abs(a - a_ref) > 1e-6 * a_ref:
        fail(f"{path} and {ref_path}: different scale factors")
    # The bins start at the same mass (32 particles of the same mass): match them by lower edge.
    n = {round(r[0], 3): r[3] for r in rows}
    n_ref = {round(r[0], 3): r[3] for r in rows_ref}
    edges = sorted(set(n) | set(n_ref))
    table = []
    for e in edges:
        a_n, r_n = n.get(e, 0.0), n_ref.get(e, 0.0)
        sigma = math.sqrt(max(r_n, 1.0))
        table.append((e, a_n, r_n, (a_n - r_n) / sigma))
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("reference_dir")
    ap.add_argument("--label", default=None, help="name of the comparison in the printout")
    ap.add_argument("--plot", default=None, help="write PREFIX_pk.png and PREFIX_massfn.png")
    args = ap.parse_args()
    for d in (args.run_dir, args.reference_dir):
        if not os.path.isdir(d):
            fail(f"{d}: not a directory")
    label = args.label or f"{args.run_dir} vs {args.reference_dir}"
    indices = outputs(args.reference_dir)
    ok = True
    pk_curves, mf_tables = [], []
    print(f"# {label}")
    print("# output   z     max|dP/P| k<=1 (at k)      max|dP/P| k<=k_Ny (at k)   k_Ny    "
          "massfn: bins  max|dN|/sqrt(N_ref)  chi2/bin")
    for idx in indices:
        pk_path = os.path.join(args.run_dir, f"powerspec_{idx}.txt")
        if not os.path.exists(pk_path):
            fail(f"{pk_path}: missing (the reference has output {idx})")
        a, k_ny, k, ratio, rows = compare_pk(pk_path, os.path.join(args.reference_dir, f"powerspec_{idx}.txt"))
        pk_ok = rows["k<=1"][0] < PK_BAR_K1 and rows["k<=k_Ny"][0] < PK_BAR_NYQUIST
        pk_curves.append((1 / a - 1, k, ratio, k_ny))
        mf_path = os.path.join(args.run_dir, f"fof_tab_{idx}_massfn.txt")
        mf_ref = os.path.join(args.reference_dir, f"fof_tab_{idx}_massfn.txt")
        mf_text, mf_ok = "      (no FoF)", True
        if os.path.exists(mf_path) and os.path.exists(mf_ref):
            table = compare_massfn(mf_path, mf_ref)
            mf_tables.append((1 / a - 1, table))
            if table:
                worst = max(abs(t[3]) for t in table)
                chi2 = sum(t[3] ** 2 for t in table) / len(table)
                mf_ok = worst <= MASSFN_SIGMA
                mf_text = f"{len(table):12d}  {worst:18.2f}  {chi2:8.2f}"
            else:
                mf_text = "           0 (no haloes in either run)"
        ok = ok and pk_ok and mf_ok
        print(f"  {idx}  {1 / a - 1:6.3f}   {rows['k<=1'][0]:9.2e} ({rows['k<=1'][1]:.3f})"
              f"        {rows['k<=k_Ny'][0]:9.2e} ({rows['k<=k_Ny'][1]:.3f})       {k_ny:.3f}  {mf_text}"
              f"   {'ok' if pk_ok and mf_ok else 'FAIL'}")
    print(f"# bars: |dP/P| < {PK_BAR_K1:g} for k <= 1 h/Mpc, < {PK_BAR_NYQUIST:g} to k_Ny; "
          f"mass function within {MASSFN_SIGMA:g} Poisson sigma per bin: {'all hold' if ok else 'NOT all hold'}")
    if args.plot:
        plot(args.plot, label, pk_curves, mf_tables)
    return 0 if ok else 1


def plot(prefix, label, pk_curves, mf_tables):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for z, k, ratio, k_ny in pk_curves:
        ax.semilogx(k, 100 * ratio, label=f"z = {z:.2f}")
    k_ny = pk_curves[0][3]
    ax.axvline(k_ny, color="grey", ls=":", label="particle Nyquist")
    ax.axvline(1.0, color="grey", ls="--")
    for bar in (1, -1, 3, -3):
        ax.axhline(bar, color="grey", lw=0.5)
    ax.set_xlabel("k [h/Mpc]")
    ax.set_ylabel("P / P_ref - 1 [%]")
    ax.set_ylim(-5, 5)
    ax.set_title(label, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(prefix + "_pk.png", dpi=120)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for z, table in mf_tables:
        if not table:
            continue
        e = np.array([t[0] for t in table]) + 0.1
        ax.errorbar(e, [t[2] for t in table], yerr=np.sqrt([max(t[2], 1) for t in table]), fmt="o", ms=3,
                    label=f"reference z = {z:.2f}")
        ax.plot(e, [t[1] for t in table], "x", label=f"run z = {z:.2f}")
    ax.set_yscale("log")
    ax.set_xlabel("log10 M_FoF [Msun/h]")
    ax.set_ylabel("haloes per bin")
    ax.set_title(label, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(prefix + "_massfn.png", dpi=120)
    print(f"wrote {prefix}_pk.png and {prefix}_massfn.png")


if __name__ == "__main__":
    sys.exit(main())
