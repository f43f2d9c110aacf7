#!/usr/bin/env python3
"""Projected-density images (PNG) of every snapshot of a run: the frames of a movie.

usage: project_snapshots.py RUN_DIR_OR_SNAPSHOTS... [--axis x|y|z] [--pixels N]
                            [--extent L | --mass-fraction F] [--cmap NAME] [--out DIR]
                            [--no-labels] [--movie FILE]

For each snapshot (snapshot_NNN.hdf5, or the set snapshot_NNN.0.hdf5, .1.hdf5, ... that runs
with files_per_snapshot > 1 write) it sums the particles' masses (every PartTypeN group;
MassTable or PartTypeN/Masses) into an N x N histogram on the plane perpendicular to --axis
(z by default: the xy plane), divides by the pixel area (a surface density) and writes
snapshot_NNN.png next to the snapshot, or into --out. One PNG pixel is one histogram cell
(x to the right, the second coordinate up), so the frames can be measured as well as watched.

What stays fixed over the run, so that the frames of a movie are comparable:
  - the colour scale: logarithmic, from half the faintest non-empty pixel (so that it is not
    the colour of an empty one) to the brightest, over all the snapshots (or --vmin/--vmax);
  - the field: for a vacuum run (/Header BoxSize = 0), a square centred on the centre of mass
    of the first snapshot, the smallest one holding --mass-fraction of its mass (0.9), or of
    side --extent; for a periodic run, the whole box (the plane's periodic images wrapped).
The label (top left) is the time: t in the run's unit (and in Gyr/Myr for GADGET's galaxy
units) for a vacuum run, z for a periodic one; bottom left, the width of the field.

Example (the merger of params/hernquist_merger.toml, then its movie):
  orbis run params/hernquist_merger.toml
  python3 analysis/python/project_snapshots.py output_merger --extent 120
  python3 analysis/python/make_movie.py output_merger      # output_merger/movie.mp4 (.gif)

Needs numpy, h5py and matplotlib (Debian: python3-numpy python3-h5py python3-matplotlib).
"""
import argparse
import glob
import os
import re
import sys

import h5py
import numpy as np

AXES = {"x": (1, 2), "y": (2, 0), "z": (0, 1)}   # projection axis -> (horizontal, vertical)
AXIS_NAMES = "xyz"
KPC_IN_CM, MPC_IN_CM = 3.085678e21, 3.085678e24
GYR_IN_S = 3.15576e16
SNAPSHOT = re.compile(r"^(snapshot_\d+)(\.\d+)?\.hdf5$")


def find_snapshots(paths):
    """[(stem, [files...])], in snapshot order: a run folder's snapshot_NNN[.k].hdf5, or files."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            files += glob.glob(os.path.join(path, "snapshot_*.hdf5"))
        elif os.path.isfile(path):
            files.append(path)
        else:
            sys.exit(f"{path}: no such snapshot file or run folder")
    sets = {}
    for name in files:
        match = SNAPSHOT.match(os.path.basename(name))
        if not match:
            if len(paths) == 1 and os.path.isdir(paths[0]):
                continue      # e.g. snapshot_004_pk.hdf5 beside the snapshots
            stem = os.path.splitext(name)[0]
            sets.setdefault(stem, []).append((0, name))
            continue
        stem = os.path.join(os.path.dirname(name), match.group(1))
        part = int(match.group(2)[1:]) if match.group(2) else 0
        sets.setdefault(stem, []).append((part, name))
    if not sets:
        sys.exit(f"{' '.join(paths)}: no snapshot_NNN.hdf5 files")
    return [(stem, [name for _, name in sorted(sets[stem])]) for stem in sorted(sets)]


def attribute(group, key, default=None):
    value = group.attrs.get(key, default)
    if isinstance(value, bytes):
        value = value.decode()
    return value


def read_snapshot(files):
    """Positions (n, 3), masses (n,) and the header's facts, from one snapshot's files."""
    positions, masses, header = [], [], None
    for name in files:
        try:
            h5 = h5py.File(name, "r")
        except OSError as e:
            sys.exit(f"{name}: not an HDF5 file ({e})")
        with h5:
            if "Header" not in h5:
                sys.exit(f"{name}: no /Header group (expected GADGET-4 HDF5 layout)")
            if header is None:
                h = h5["Header"]
                p = h5["Parameters"] if "Parameters" in h5 else h
                header = {
                    "time": float(attribute(h, "Time", 0.0)),
                    "redshift": float(attribute(h, "Redshift", 0.0)),
                    "box": float(attribute(h, "BoxSize", 0.0)),
                    "length_cm": float(attribute(h, "UnitLength_in_cm", attribute(p, "UnitLength_in_cm", 1.0))),
                    "velocity_cm_s": float(attribute(h, "UnitVelocity_in_cm_per_s",
                                                     attribute(p, "UnitVelocity_in_cm_per_s", 1.0))),
                    "units": attribute(p, "units.system", ""),
                    "comoving": int(attribute(p, "ComovingIntegrationOn", 1 if attribute(h, "BoxSize", 0.0) else 0)),
                }
            table = np.asarray(h5["Header"].attrs.get("MassTable", np.zeros(6)), dtype=float)
            for t in range(6):
                group = f"PartType{t}"
                if group not in h5 or "Coordinates" not in h5[group]:
                    continue
                x = np.asarray(h5[group]["Coordinates"][:], dtype=float).reshape(-1, 3)
                if "Masses" in h5[group]:
                    m = np.asarray(h5[group]["Masses"][:], dtype=float)
                elif t < len(table) and table[t] > 0:
                    m = np.full(len(x), table[t])
                else:
                    sys.exit(f"{name}: {group} has neither a Masses dataset nor a mass in /Header MassTable[{t}]")
                positions.append(x)
                masses.append(m)
    if not positions:
        sys.exit(f"{files[0]}: no particles (no PartTypeN/Coordinates)")
    return np.concatenate(positions), np.concatenate(masses), header


def field_of_view(positions, masses, header, args):
    """(left, bottom, width) of the square imaged, in the snapshot's length unit."""
    i, j = AXES[args.axis]
    if header["box"] > 0:
        return 0.0, 0.0, header["box"]
    centre = np.sum(positions * masses[:, None], axis=0) / np.sum(masses)
    if args.centre is not None:
        centre = np.asarray(args.centre, dtype=float)
    if args.extent is not None:
        width = args.extent
    else:
        # The smallest square about the centre holding the fraction of the mass: the mass-
        # weighted quantile of the distance along the larger of the two projected offsets.
        d = np.maximum(np.abs(positions[:, i] - centre[i]), np.abs(positions[:, j] - centre[j]))
        order = np.argsort(d)
        cumulative = np.cumsum(masses[order]) / np.sum(masses)
        half = d[order][min(np.searchsorted(cumulative, args.mass_fraction), len(d) - 1)]
        width = 2.0 * half
        if not width > 0:
            sys.exit("the particles of the first snapshot all sit at the centre of mass: give --extent")
    return centre[i] - 0.5 * width, centre[j] - 0.5 * width, width


def project(positions, masses, view, header, axis, pixels):
    """Surface density (mass per length unit squared) on the pixels x pixels grid; row 0 is the
    bottom (smallest second coordinate)."""
    i, j = AXES[axis]
    left, bottom, width = view
    u, v = positions[:, i] - left, positions[:, j] - bottom
    if header["box"] > 0:
        u, v = np.mod(u, header["box"]), np.mod(v, header["box"])
    edges = np.linspace(0.0, width, pixels + 1)
    mass, _, _ = np.histogram2d(v, u, bins=(edges, edges), weights=masses)
    return mass / (width / pixels) ** 2


def length_unit(header):
    """The name of the snapshot's length unit for the labels (kpc, Mpc, Mpc/h; empty: N-body)."""
    length_cm = header["length_cm"]
    if np.isclose(length_cm, KPC_IN_CM, rtol=1e-4):
        length = "kpc"
    elif np.isclose(length_cm, MPC_IN_CM, rtol=1e-4):
        length = "Mpc"
    else:
        length = ""
    if header["box"] > 0 and header["comoving"] and length:
        length += "/h"
    return length


def time_label(header):
    if header["box"] > 0 and header["comoving"]:
        return f"z = {header['redshift']:.2f}"
    text = f"t = {header['time']:.4g}"
    if header["length_cm"] != 1.0 and header["velocity_cm_s"] != 1.0:
        seconds = header["time"] * header["length_cm"] / header["velocity_cm_s"]
        gyr = seconds / GYR_IN_S
        text += f"  ({gyr:.3g} Gyr)" if gyr >= 1 else f"  ({gyr * 1e3:.3g} Myr)"
    elif header["units"] == "nbody" or header["length_cm"] == 1.0:
        text += " (N-body units)"
    return text


def write_png(path, sigma, vmin, vmax, cmap, labels):
    """One PNG pixel per cell: a figure of exactly pixels x pixels points, no axes."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.colors import LogNorm
    from matplotlib.figure import Figure

    pixels = sigma.shape[0]
    dpi = pixels      # a figure of one inch: exactly `pixels` pixels a side, whatever the rounding
    figure = Figure(figsize=(1, 1), dpi=dpi)
    ax = figure.add_axes([0, 0, 1, 1])
    ax.set_axis_off()
    colours = matplotlib.colormaps[cmap].copy()
    colours.set_bad(colours(0.0))      # empty pixels (log of 0): the colour of the floor
    colours.set_under(colours(0.0))
    shown = np.where(sigma > 0, sigma, np.nan)
    ax.imshow(shown, origin="lower", interpolation="nearest", cmap=colours,
              norm=LogNorm(vmin=vmin, vmax=vmax), extent=(0, pixels, 0, pixels), aspect="equal")
    ax.set_xlim(0, pixels)
    ax.set_ylim(0, pixels)
    if labels:
        size = max(8.0, pixels / 40) * 72.0 / dpi      # points, for a text this many pixels high
        for text, y, va in ((labels[0], 0.98, "top"), (labels[1], 0.02, "bottom")):
            ax.text(0.02, y, text, transform=ax.transAxes, color="white", fontsize=size, va=va, ha="left",
                    family="monospace")
    figure.savefig(path, dpi=dpi)


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", help="a run folder, or snapshot files")
    parser.add_argument("--axis", choices=list(AXES), default="z",
                        help="the line of sight: z (default) images the xy plane, x the yz, y the zx")
    parser.add_argument("--pixels", type=int, default=512, help="image side in pixels (default 512)")
    parser.add_argument("--extent", type=float, help="vacuum: side of the square imaged, in the run's length unit")
    parser.add_argument("--mass-fraction", type=float, default=0.9,
                        help="vacuum, without --extent: the square holds this fraction of the first snapshot's "
                             "mass (default 0.9)")
    parser.add_argument("--centre", type=float, nargs=3, metavar=("X", "Y", "Z"),
                        help="vacuum: centre of the field (default: the first snapshot's centre of mass)")
    parser.add_argument("--vmin", type=float, help="surface density at the bottom of the colour scale")
    parser.add_argument("--vmax", type=float, help="surface density at the top of the colour scale")
    parser.add_argument("--cmap", default="inferno", help="matplotlib colour map (default inferno)")
    parser.add_argument("--out", help="folder for the PNGs (default: beside each snapshot)")
    parser.add_argument("--no-labels", action="store_true", help="no time or width written on the frames")
    parser.add_argument("--movie", help="then make this movie of the frames (make_movie.py: .mp4 or .gif)")
    args = parser.parse_args(argv)
    if args.pixels < 2:
        parser.error(f"--pixels {args.pixels}: expected an image side of at least 2 pixels")
    if args.extent is not None and not args.extent > 0:
        parser.error(f"--extent {args.extent}: expected a positive length")
    if not 0 < args.mass_fraction <= 1:
        parser.error(f"--mass-fraction {args.mass_fraction}: expected a fraction in (0, 1]")
    for name, value in (("--vmin", args.vmin), ("--vmax", args.vmax)):
        if value is not None and not value > 0:
            parser.error(f"{name} {value}: expected a positive surface density (the scale is logarithmic)")
    if args.vmin is not None and args.vmax is not None and not args.vmin < args.vmax:
        parser.error(f"--vmin {args.vmin} --vmax {args.vmax}: expected 0 < vmin < vmax")
    try:
        import matplotlib
        matplotlib.colormaps[args.cmap]
    except ImportError as e:
        sys.exit(f"{sys.executable} cannot import matplotlib ({e}); Debian: apt-get install python3-matplotlib")
    except KeyError:
        parser.error(f"--cmap {args.cmap}: not a matplotlib colour map")
    return args


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    snapshots = find_snapshots(args.inputs)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    # First pass: the images (the colour scale needs all of them before the first is drawn).
    view, images = None, []
    for stem, files in snapshots:
        positions, masses, header = read_snapshot(files)
        if view is None:
            view = field_of_view(positions, masses, header, args)
        images.append((stem, header, project(positions, masses, view, header, args.axis, args.pixels)))
    positive = [s[s > 0] for _, _, s in images if np.any(s > 0)]
    if not positive:
        sys.exit("no particle of any snapshot falls in the field: give a larger --extent or another --centre")
    # Half the faintest pixel at the bottom of the scale: a lone particle stays visible, not the
    # colour of an empty pixel.
    vmin = args.vmin if args.vmin is not None else 0.5 * min(float(p.min()) for p in positive)
    vmax = args.vmax if args.vmax is not None else max(float(p.max()) for p in positive)
    if not vmax > vmin:
        sys.exit(f"--vmin {vmin:g} --vmax {vmax:g}: expected vmin < vmax")
    i, j = AXES[args.axis]
    made = []
    for stem, header, sigma in images:
        folder = args.out if args.out else os.path.dirname(stem)
        path = os.path.join(folder, os.path.basename(stem) + ".png")
        length = length_unit(header)
        labels = None if args.no_labels else (
            time_label(header),
            f"{AXIS_NAMES[i]}{AXIS_NAMES[j]}, width {view[2]:.4g}{' ' + length if length else ''}")
        write_png(path, sigma, vmin, vmax, args.cmap, labels)
        made.append(path)
    print(f"wrote {len(made)} images ({args.pixels} x {args.pixels}, {AXIS_NAMES[i]}{AXIS_NAMES[j]} plane, "
          f"width {view[2]:.6g}, colour range {vmin:.4g} to {vmax:.4g} per unit area): "
          f"{made[0]}{' ... ' + made[-1] if len(made) > 1 else ''}")
    if args.movie:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import make_movie
        make_movie.main(made + ["--out", args.movie])
    return made


if __name__ == "__main__":
    main()
