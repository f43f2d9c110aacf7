#!/usr/bin/env python3
"""Plot the halo mass function of orbis catalogues against Reed et al. (2007) and Tinker et
al. (2008) fits computed from the run's own cosmology.

    plot_mass_function.py fof_tab_003.hdf5 [more catalogues ...] [--out massfn.png]

For each catalogue NAME.hdf5 the measured dn/dlog10M is read from NAME_massfn.txt (written by
orbis next to the catalogue: FoF masses and M200m, Poisson errors). The fits use the
cosmology stored in the catalogue (/Header Omega0, OmegaLambda, Time; /Parameters
cosmology.{h, omega_b, n_s, sigma8, w0}); the linear power spectrum is self-contained:
Eisenstein & Hu (1998) no-wiggle transfer function, normalised to sigma8 at z = 0, scaled by
the linear growth factor D(a) from the growth ODE (any constant w0).

  Reed et al. 2007 (MNRAS 374, 2), eq. 12, for FoF b = 0.2 masses;
  Tinker et al. 2008 (ApJ 688, 709), Table 2 and eqs. 5-8, for M200m (200 x mean density).

Needs numpy, h5py and matplotlib (Debian: /usr/bin/python3).
"""
import argparse
import os
import sys

import numpy as np

RHO_CRIT0 = 3.0e4 / (8.0 * np.pi * 43.0071) * 1e10  # Msun/h / (Mpc/h)^3, G as in orbis
DELTA_C = 1.686                                    # linear collapse threshold
T_CMB = 2.7255                                     # K
_trapezoid = getattr(np, "trapezoid", None) or np.trapz   # numpy >= 2 renamed trapz


# ----------------------------------------------------------------------- linear theory
def eh_nowiggle_transfer(k_h, omega_m, omega_b, h):
    """Eisenstein & Hu (1998) eqs. 26-31, the zero-baryon-oscillation fit; k in h/Mpc."""
    om_h2, ob_h2 = omega_m * h * h, omega_b * h * h
    fb = omega_b / omega_m
    theta = T_CMB / 2.7
    s = 44.5 * np.log(9.83 / om_h2) / np.sqrt(1.0 + 10.0 * ob_h2 ** 0.75)  # Mpc, eq. 26
    alpha = 1.0 - 0.328 * np.log(431.0 * om_h2) * fb + 0.38 * np.log(22.3 * om_h2) * fb ** 2
    k_mpc = k_h * h
    gamma_eff = omega_m * h * (alpha + (1.0 - alpha) / (1.0 + (0.43 * k_mpc * s) ** 4))
    q = k_h * theta ** 2 / gamma_eff
    l0 = np.log(2.0 * np.e + 1.8 * q)
    c0 = 14.2 + 731.0 / (1.0 + 62.5 * q)
    return l0 / (l0 + c0 * q * q)


def growth_factor(a_out, omega_m, omega_lambda, w0):
    """D(a)/D(1) from D'' + (2 + dlnE/dlna) D' - 1.5 Omega_m(a) D = 0 in ln a (RK4),
    starting in the matter era with D = a."""
    omega_k = 1.0 - omega_m - omega_lambda

    def e2(a):
        return omega_m * a ** -3 + omega_k * a ** -2 + omega_lambda * a ** (-3.0 * (1.0 + w0))

    def dlne_dlna(a):
        return (-3.0 * omega_m * a ** -3 - 2.0 * omega_k * a ** -2
                - 3.0 * (1.0 + w0) * omega_lambda * a ** (-3.0 * (1.0 + w0))) / (2.0 * e2(a))

    def rhs(lna, y):
        a = np.exp(lna)
        om = omega_m * a ** -3 / e2(a)
        return np.array([y[1], -(2.0 + dlne_dlna(a)) * y[1] + 1.5 * om * y[0]])

    def integrate(a_end):
        lna0, steps = np.log(1e-3), 4000
        h = (np.log(a_end) - lna0) / steps
        y, x = np.array([1e-3, 1e-3]), lna0
        for _ in range(steps):
            k1 = rhs(x, y)
            k2 = rhs(x + h / 2, y + h / 2 * k1)
            k3 = rhs(x + h / 2, y + h / 2 * k2)
            k4 = rhs(x + h, y + h * k3)
            y, x = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4), x + h
        return y[0]

    return integrate(a_out) / integrate(1.0)


class LinearTheory:
    """sigma(M) at scale factor a for a top-hat filter."""

    def __init__(self, cosmo, a):
        self.k = np.logspace(-5, 3, 4000)  # h/Mpc
        t = eh_nowiggle_transfer(self.k, cosmo["omega_m"], cosmo["omega_b"], cosmo["h"])
        pk = self.k ** cosmo["n_s"] * t * t
        self.pk = pk * (cosmo["sigma8"] / self._sigma_r(8.0, pk)) ** 2  # z = 0 normalisation
        self.growth = growth_factor(a, cosmo["omega_m"], cosmo["omega_lambda"], cosmo["w0"])
        self.rho_mean = cosmo["omega_m"] * RHO_CRIT0

    def _sigma_r(self, r, pk):
        x = self.k * r
        w = 3.0 * (np.sin(x) - x * np.cos(x)) / x ** 3
        w = np.where(x < 1e-4, 1.0 - x * x / 10.0, w)
        return np.sqrt(_trapezoid(self.k ** 3 * pk * w * w, np.log(self.k)) / (2.0 * np.pi ** 2))

    def sigma(self, mass):
        """sigma(M, a), M in Msun/h."""
        r = np.cbrt(3.0 * mass / (4.0 * np.pi * self.rho_mean))
        return np.array([self._sigma_r(ri, self.pk) for ri in np.atleast_1d(r)]) * self.growth


def mass_function(theory, mass, f_of_sigma):
    """dn/dlog10M [(h/Mpc)^3] = ln10 f(sigma) rho_mean / M dln(1/sigma)/dlnM."""
    lnm = np.log(mass)
    sigma = theory.sigma(mass)
    dlninv_dlnm = -np.gradient(np.log(sigma), lnm)
    n_eff = 6.0 * dlninv_dlnm - 3.0
    return np.log(10.0) * f_of_sigma(sigma, n_eff) * theory.rho_mean / mass * dlninv_dlnm


def reed07(sigma, n_eff):
    """Reed et al. 2007 eq. 12 (c = 1.08, ca = 0.764, p = 0.3, A = 0.3222)."""
    big_a, c, p = 0.3222, 1.08, 0.3
    a = 0.764 / c
    nu = DELTA_C / sigma
    lninv = np.log(1.0 / sigma)
    g1 = np.exp(-(lninv - 0.4) ** 2 / (2 * 0.6 ** 2))
    g2 = np.exp(-(lninv - 0.75) ** 2 / (2 * 0.2 ** 2))
    return (big_a * np.sqrt(2.0 * a / np.pi) * (1.0 + (a * nu * nu) ** -p + 0.6 * g1 + 0.4 * g2) * nu
            * np.exp(-c * a * nu * nu / 2.0 - 0.03 * nu ** 0.6 / (n_eff + 3.0) ** 2))


def tinker08_200m(redshift):
    """Tinker et al. 2008, Delta = 200 (mean density), with the redshift evolution eqs. 5-8."""
    delta = 200.0
    alpha = 10.0 ** (-(0.75 / np.log10(delta / 75.0)) ** 1.2)
    big_a = 0.186 * (1.0 + redshift) ** -0.14
    a = 1.47 * (1.0 + redshift) ** -0.06
    b = 2.57 * (1.0 + redshift) ** -alpha
    c = 1.19

    def f(sigma, n_eff):
        return big_a * ((sigma / b) ** -a + 1.0) * np.exp(-c / sigma ** 2)
    return f


# ----------------------------------------------------------------------- input
def read_catalogue_cosmology(path):
    import h5py
    with h5py.File(path, "r") as f:
        head, par = f["Header"].attrs, (f["Parameters"].attrs if "Parameters" in f else {})

        def p(name, fallback):
            return float(par[name]) if name in par else fallback
        cosmo = {
            "omega_m": float(head["Omega0"]), "omega_lambda": float(head["OmegaLambda"]),
            "h": float(head["HubbleParam"]), "omega_b": p("cosmology.omega_b", 0.0494),
            "n_s": p("cosmology.n_s", 0.966), "sigma8": p("cosmology.sigma8", 0.812),
            "w0": p("cosmology.w0", -1.0), "a": float(head["Time"]), "box": float(head["BoxSize"]),
            "defaults": [k for k in ("cosmology.omega_b", "cosmology.n_s", "cosmology.sigma8") if k not in par],
        }
    return cosmo


def read_mass_function(catalogue):
    stem = catalogue[:-5] if catalogue.endswith(".hdf5") else catalogue
    path = stem + "_massfn.txt"
    if not os.path.exists(path):
        sys.exit(f"plot_mass_function: '{path}' not found; orbis writes it next to each catalogue")
    with open(path) as f:
        rows = [line for line in f if line.strip() and not line.startswith("#")]
    data = np.loadtxt(rows, ndmin=2) if rows else np.empty((0, 1))   # no haloes: no rows
    return path, data


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("catalogues", nargs="+", help="fof_tab_NNN.hdf5 files")
    parser.add_argument("--out", help="image file (default: next to the first catalogue, NAME_massfn.png)")
    args = parser.parse_args(argv)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 8), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 1.3]})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for n, catalogue in enumerate(args.catalogues):
        cosmo = read_catalogue_cosmology(catalogue)
        if cosmo["defaults"]:
            print(f"plot_mass_function: {catalogue} has no {', '.join(cosmo['defaults'])}; using orbis defaults")
        _, data = read_mass_function(catalogue)
        if data.size == 0:
            print(f"plot_mass_function: {catalogue} has no haloes; skipped")
            continue
        z = 1.0 / cosmo["a"] - 1.0
        theory = LinearTheory(cosmo, cosmo["a"])
        colour = colours[n % len(colours)]
        mid = 10.0 ** data[:, 2]
        mass = np.logspace(data[0, 0], data[-1, 1], 200)
        fits = {"FoF": (reed07, 3, 4, 5, "o", "Reed+07 (FoF)", "-"),
                "200m": (tinker08_200m(z), 6, 7, 8, "s", "Tinker+08 (200m)", "--")}
        for name, (fit, cn, cdn, cerr, marker, label, style) in fits.items():
            keep = data[:, cn] > 0
            model = mass_function(theory, mass, fit)
            top.plot(mass, model, style, color=colour, lw=1, label=f"{label}, z = {z:.2f}")
            top.errorbar(mid[keep], data[keep, cdn], yerr=data[keep, cerr], fmt=marker, color=colour,
                         mfc="none" if name == "200m" else colour, ms=4,
                         label=f"orbis {name}, z = {z:.2f}")
            ratio_model = np.interp(np.log(mid[keep]), np.log(mass), model)
            bottom.errorbar(mid[keep], data[keep, cdn] / ratio_model, yerr=data[keep, cerr] / ratio_model,
                            fmt=marker, color=colour, mfc="none" if name == "200m" else colour, ms=4)
    top.set_xscale("log")
    top.set_yscale("log")
    top.set_ylabel(r"$dn/d\log_{10}M$  [$h^3\,\mathrm{Mpc}^{-3}$]")
    top.legend(fontsize=7)
    bottom.axhline(1.0, color="k", lw=0.8)
    bottom.set_yscale("log")
    bottom.set_xlabel(r"$M$  [$M_\odot/h$]")
    bottom.set_ylabel("measured / fit")
    out = args.out or (args.catalogues[0][:-5] if args.catalogues[0].endswith(".hdf5")
                       else args.catalogues[0]) + "_massfn.png"
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    print(f"plot_mass_function: wrote {out}")


if __name__ == "__main__":
    main()
