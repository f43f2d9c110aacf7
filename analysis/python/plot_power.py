#!/usr/bin/env python3
"""Plot the measured power spectra of a run against linear theory.

Reads the P(k) outputs of orbis (HDF5 files with a /PowerSpectrum group, or the text tables
whose header line starts with "# k_mean") from run directories or files, and draws P(k) at
each output with P_lin(k) D(z)^2 dashed and the shot noise dotted, and below it the ratio
P / (P_lin D^2). Writes a PNG.

    plot_power.py RUN_DIR [MORE_DIRS_OR_FILES ...] [--out power.png] [--subtract-shot-noise]

Needs numpy, matplotlib and (for HDF5) h5py.
"""
import argparse
import glob
import os
import sys

import numpy as np


def read_hdf5(path):
    import h5py
    with h5py.File(path, "r") as f:
        if "PowerSpectrum" not in f:
            return None
        g, h = f["PowerSpectrum"], f["Header"].attrs
        return {
            "path": path,
            "a": float(h["Time"]),
            "z": float(h["Redshift"]),
            "k": g["K"][()],
            "P": g["Power"][()],
            "modes": g["NumModes"][()],
            "shot": g["ShotNoise"][()],
            "lin": g["LinearPower"][()],
            "fold": g["Fold"][()],
            "subtracted": bool(h["ShotNoiseSubtracted"]),
        }


def read_text(path):
    with open(path) as f:
        header = f.readline()
    # Only orbis power-spectrum tables (not e.g. the IC self-test's ic_power.txt).
    if not header.startswith("# k_mean [h/Mpc]  P [(Mpc/h)^3]"):
        return None
    meta = {}
    for item in header.split(";", 1)[1].split(","):
        if "=" in item:
            key, value = item.split("=", 1)
            meta[key.strip()] = value.strip()
    data = np.loadtxt(path, comments="#", ndmin=2)
    a = float(meta.get("a", "nan"))
    return {
        "path": path,
        "a": a,
        "z": 1.0 / a - 1.0,
        "k": data[:, 0],
        "P": data[:, 1],
        "modes": data[:, 2],
        "shot": data[:, 3],
        "lin": data[:, 4],
        "fold": data[:, 5],
        "subtracted": "shot noise subtracted" in header,
    }


def collect(inputs):
    """Spectra from files and directories; HDF5 preferred over a text twin of the same name."""
    files = []
    for item in inputs:
        if os.path.isdir(item):
            files += sorted(glob.glob(os.path.join(item, "**", "*.hdf5"), recursive=True))
            files += sorted(glob.glob(os.path.join(item, "**", "*.txt"), recursive=True))
        else:
            files.append(item)
    spectra, seen = [], set()
    for path in files:
        stem = os.path.splitext(path)[0]
        if stem in seen:
            continue
        try:
            spectrum = read_hdf5(path) if path.endswith(".hdf5") else read_text(path)
        except (OSError, ValueError, KeyError, IndexError):
            spectrum = None
        if spectrum is not None:
            spectra.append(spectrum)
            seen.add(stem)
    return sorted(spectra, key=lambda s: s["a"])


def plot(spectra, out, subtract):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7, 7),
                                      gridspec_kw={"height_ratios": [3, 1.3], "hspace": 0.05})
    colours = plt.cm.viridis(np.linspace(0, 0.9, max(len(spectra), 1)))
    any_linear, ratio_max = False, 2.0
    for s, colour in zip(spectra, colours):
        power = s["P"] - (s["shot"] if subtract and not s["subtracted"] else 0.0)
        label = f"z = {s['z']:.2f}"
        top.loglog(s["k"], np.where(power > 0, power, np.nan), "-", color=colour, label=label)
        top.loglog(s["k"], s["shot"], ":", color=colour, lw=0.8)
        linear = s["lin"]
        if np.any(np.isfinite(linear)):
            any_linear = True
            top.loglog(s["k"], linear, "--", color=colour, lw=0.9)
            ratio = power / linear
            bottom.semilogx(s["k"], ratio, "-", color=colour)
            if np.any(np.isfinite(ratio)):
                ratio_max = max(ratio_max, min(30.0, 1.2 * float(np.nanmax(ratio))))
    top.set_ylabel(r"$P(k)$ [$(h^{-1}\,\mathrm{Mpc})^3$]")
    top.legend(title="solid: measured, dashed: linear, dotted: shot noise", fontsize=8,
               title_fontsize=8)
    bottom.axhline(1.0, color="k", lw=0.6)
    bottom.set_xlabel(r"$k$ [$h\,\mathrm{Mpc}^{-1}$]")
    bottom.set_ylabel(r"$P / P_\mathrm{lin} D^2$")
    if not any_linear:
        bottom.text(0.5, 0.5, "no linear-theory column in these files", ha="center",
                    va="center", transform=bottom.transAxes)
    else:
        # Nonlinear growth lifts the ratio far above 1 at high k: a log axis keeps 1 readable.
        bottom.set_yscale("log")
        bottom.set_ylim(0.5, ratio_max)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", help="run directories or P(k) files")
    parser.add_argument("--out", default="power.png", help="PNG to write (default power.png)")
    parser.add_argument("--subtract-shot-noise", action="store_true",
                        help="subtract the shot-noise column before plotting")
    args = parser.parse_args(argv)
    spectra = collect(args.inputs)
    if not spectra:
        print(f"plot_power.py: no P(k) files found in {' '.join(args.inputs)}", file=sys.stderr)
        return 1
    plot(spectra, args.out, args.subtract_shot_noise)
    print(f"plot_power.py: {len(spectra)} spectra -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
