#!/usr/bin/env python3
"""Plot the IC self-test of `orbis ic`: measured vs input P(k) of the IC density field and of
the particles' displacement field, with the ratio and the cosmic-variance band.

    python3 analysis/python/plot_ic_power.py OUTPUT/ic_power.txt [-o OUTPUT/ic_power.png]

Input: ic_power.txt as written by `orbis ic` (ic/ic_power.cpp), columns
k_mean [h/Mpc], P_measured, P_input = P_lin(k) D(z_init)^2, N_modes, then the same four for
-div(x - q). Needs numpy and matplotlib.
"""
import argparse
import os
import sys

import numpy as np
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", help="ic_power.txt written by `orbis ic`")
    parser.add_argument("-o", "--output", help="PNG to write (default: next to the table)")
    args = parser.parse_args(argv)

    data = np.atleast_2d(np.loadtxt(args.table))
    if data.shape[1] != 8:
        sys.exit(f"{args.table}: {data.shape[1]} columns, expected 8 (see `orbis ic`)")
    k, p_delta, p_in, modes = data[:, 0], data[:, 1], data[:, 2], data[:, 3]
    p_disp, p_in_disp = data[:, 5], data[:, 6]
    # Each (k, -k) pair is one exponential deviate: the relative scatter is sqrt(2 / N_modes).
    sigma = np.sqrt(2.0 / modes)
    # The grid's Nyquist frequency: the largest |k| on the grid is sqrt(3) k_Nyq.
    k_nyq = k.max() / np.sqrt(3.0)

    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7, 7),
                                      gridspec_kw={"height_ratios": [2, 1]})
    top.loglog(k, p_in, "k-", lw=1.5, label=r"input $P_\mathrm{lin}(k)\,D^2(z_\mathrm{init})$")
    top.loglog(k, p_delta, "o", ms=3, label=r"$\delta$ as generated")
    top.loglog(k, p_disp, "x", ms=4, label=r"$-\nabla\cdot(\mathbf{x}-\mathbf{q})$ of the particles")
    top.set_ylabel(r"$P(k)\ [(\mathrm{Mpc}/h)^3]$")
    top.legend(frameon=False)
    bottom.fill_between(k, 1 - sigma, 1 + sigma, color="0.85", label=r"$\pm\sqrt{2/N_\mathrm{modes}}$")
    bottom.semilogx(k, p_delta / p_in, "o", ms=3)
    bottom.semilogx(k, p_disp / p_in_disp, "x", ms=4)
    bottom.axhline(1.0, color="k", lw=1)
    for x in (0.5 * k_nyq, k_nyq):
        top.axvline(x, color="0.6", ls=":", lw=1)
        bottom.axvline(x, color="0.6", ls=":", lw=1)
    bottom.set_ylim(0.7, 1.3)
    bottom.set_xlabel(r"$k\ [h/\mathrm{Mpc}]$ (dotted: about $k_\mathrm{Nyq}/2$ and $k_\mathrm{Nyq}$)")
    bottom.set_ylabel("measured / input")
    bottom.legend(frameon=False, loc="lower left")
    fig.tight_layout()
    output = args.output or os.path.splitext(args.table)[0] + ".png"
    fig.savefig(output, dpi=120)
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
