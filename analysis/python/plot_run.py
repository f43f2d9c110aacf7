#!/usr/bin/env python3
"""Draw every plot a run directory supports: the IC self-test (ic_power.png), the power
spectra at the outputs against linear theory (power.png) and the halo mass functions
against Reed et al. (2007) and Tinker et al. (2008) (mass_function.png).

usage: plot_run.py OUTPUT_DIR     (e.g. output/demo after `orbis run params/demo.toml`)
"""
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_ic_power  # noqa: E402
import plot_mass_function  # noqa: E402
import plot_power  # noqa: E402


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        sys.exit(__doc__)
    directory = argv[0]
    made = []
    if os.path.exists(os.path.join(directory, "ic_power.txt")):
        out = os.path.join(directory, "ic_power.png")
        plot_ic_power.main([os.path.join(directory, "ic_power.txt"), "-o", out])
        made.append(out)
    # The run's own spectra only: `orbis pk` may have left SNAPSHOT_pk files beside them.
    spectra = sorted(glob.glob(os.path.join(directory, "powerspec_*.hdf5")) +
                     glob.glob(os.path.join(directory, "powerspec_*.txt")))
    if spectra:
        out = os.path.join(directory, "power.png")
        plot_power.main(spectra + ["--out", out])
        made.append(out)
    catalogues = sorted(glob.glob(os.path.join(directory, "fof_tab_*.hdf5")))
    if catalogues:
        out = os.path.join(directory, "mass_function.png")
        plot_mass_function.main(catalogues + ["--out", out])
        made.append(out)
    if not made:
        sys.exit(f"{directory}: no ic_power.txt, powerspec_*.txt or fof_tab_*.hdf5 to plot")
    for path in made:
        print("wrote", path)


if __name__ == "__main__":
    main()
