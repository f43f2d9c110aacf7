#!/usr/bin/env python3
"""orbis's snapshots and FoF catalogues as the community's readers see them (pynbody, yt).

usage: test_pynbody_yt.py ORBIS_BINARY

Runs a small simulation with orbis (the demo's box and cosmology, 32^3 particles, outputs at
the demo's redshifts), then reads its files with h5py, pynbody and yt and checks box size,
cosmology, unit of length, positions, velocities and masses against what orbis wrote and
against values computed here (the parameter file, rho_crit); the ICs written in three files (as
runs on several ranks write snapshots) are read as a set by both. Then it runs the Python blocks of
the README's "Outputs" section on the same files and checks what they compute. Last, an
isolated system of three particle types with individual masses (a galaxy file written here
with h5py, as DICE or GalIC write one) runs two steps, and its snapshot's types and masses are
read by both.

Needs pynbody and yt (tests/ecosystem/requirements.txt): without them it prints why and exits
77, which CTest reports as skipped -- unless ORBIS_ECOSYSTEM_REQUIRED=1 (CI), then it fails.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings

SKIPPED = 77
HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "..", "..", "README.md")

# The demo's box and cosmology (params/demo.toml), fewer particles, PM only.
BOX, N_SIDE = 100.0, 32
H, OMEGA_M, OMEGA_B = 0.6732, 0.3144, 0.0494
OMEGA_L = 1.0 - OMEGA_M
SOFTENING_OVER_SPACING = 0.025
REDSHIFTS = [3.0, 1.0, 0.5, 0.0]
PARAMETERS = f"""
[cosmology]
omega_m = {OMEGA_M}
omega_b = {OMEGA_B}
h = {H}
[box]
size_mpc_h = {BOX}
particles_per_side = {N_SIDE}
[ic]
z_init = 20.0
[gravity]
solver = "pm"
softening_over_spacing = {SOFTENING_OVER_SPACING}
[time]
output_redshifts = {REDSHIFTS}
max_dln_a = 0.1
[analysis]
fof_min_members = 16
[output]
directory = "output/demo"
"""
RHO_CRIT = 27.7536627   # 3 H0^2 / (8 pi G) in (1e10 Msun/h) / (Mpc/h)^3, G = 6.674e-8 cgs
# The files use GADGET's cgs units (1 Mpc = 3.085678e24 cm, 1 Msun = 1.989e33 g); pynbody and
# yt convert with their own constants (3.0856776e24 cm, 1.98842e33 g), so a value converted
# from the file's units to theirs differs by up to 2e-7 (lengths) and 3e-4 (masses). Values
# in the file's own units must agree to rounding.
LENGTH_RTOL, MASS_RTOL = 1e-6, 5e-4

failures = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


def close(x, y, rtol=1e-10, atol=0.0):
    """x equals y (a scalar y: every element of x equals it) within rtol and atol."""
    import numpy as np
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if y.ndim == 0:
        y = np.full_like(x, float(y))
    return x.shape == y.shape and x.size > 0 and bool(np.allclose(x, y, rtol=rtol, atol=atol))


def attempt(what, function, *args):
    """function(*args), an exception counting as one failed check (the others still run)."""
    try:
        return function(*args)
    except Exception as e:
        check(False, f"{what}: {type(e).__name__}: {e}")
        return None


def skip_or_fail(message):
    if os.environ.get("ORBIS_ECOSYSTEM_REQUIRED") == "1":
        print(f"FAIL: {message} (ORBIS_ECOSYSTEM_REQUIRED=1)")
        sys.exit(1)
    print(f"SKIPPED: {message}")
    sys.exit(SKIPPED)


def import_readers():
    missing = []
    for name in ("numpy", "h5py", "pynbody", "yt"):
        try:
            __import__(name)
        except ImportError as e:
            missing.append(f"{name} ({e})")
    if missing:
        skip_or_fail(f"{sys.executable} cannot import {', '.join(missing)}; install them with "
                     f"`python3 -m venv .venv-ecosystem && .venv-ecosystem/bin/pip install -r "
                     f"tests/ecosystem/requirements.txt` and configure again")


def raw_snapshot(path):
    """What orbis wrote, straight from the file, particles in ID order."""
    import h5py
    import numpy as np
    with h5py.File(path, "r") as f:
        order = np.argsort(f["PartType1/ParticleIDs"][:])
        return {
            "a": float(f["Header"].attrs["Time"]),
            "ids": f["PartType1/ParticleIDs"][:][order],
            "pos": f["PartType1/Coordinates"][:][order],
            "u": f["PartType1/Velocities"][:][order],
            "mass": float(f["Header"].attrs["MassTable"][1]),
        }


def check_split_snapshot(stem, files, whole):
    """A multi-file set (stem.0.hdf5, ...): headers, ID order, and the particles of `whole`."""
    import h5py
    import numpy as np
    ids, pos, u, first = [], [], [], 0
    for f in range(files):
        name = f"{stem}.{f}.hdf5"
        with h5py.File(name, "r") as h5:
            header = h5["Header"].attrs
            these = h5["PartType1/ParticleIDs"][:]
            check(int(header["NumFilesPerSnapshot"]) == files and int(header["NumPart_ThisFile"][1]) == len(these) and
                  int(header["NumPart_Total"][1]) == len(whole["ids"]),
                  f"{name}: NumFilesPerSnapshot = {files}, NumPart_ThisFile[1] = {len(these)}, NumPart_Total[1] = "
                  f"{len(whole['ids'])}")
            ids.append(these)
            pos.append(h5["PartType1/Coordinates"][:])
            u.append(h5["PartType1/Velocities"][:])
    ids, pos, u = np.concatenate(ids), np.concatenate(pos), np.concatenate(u)
    check(bool(np.all(ids[1:] > ids[:-1])), f"{stem}.*.hdf5: the files in order hold the particles in ID order")
    check(np.array_equal(ids, whole["ids"]) and np.array_equal(pos, whole["pos"]) and np.array_equal(u, whole["u"]),
          f"{stem}.*.hdf5: the particles of the single file, bit for bit")


def by_id(ids, values):
    import numpy as np
    return np.asarray(values)[np.argsort(np.asarray(ids))]


def check_pynbody_snapshot(path, raw):
    import numpy as np
    import pynbody
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = pynbody.load(path)
        props = {k: s.properties[k] for k in ("h", "omegaM0", "omegaL0", "omegaB0", "a")}
        box = s.properties["boxsize"].in_units("Mpc a h**-1", **s.conversion_context())
        pos_file = by_id(s["iord"], s["pos"])   # as loaded: the file's units
        pos_units = s["pos"].units
        pos = by_id(s["iord"], s["pos"].in_units("Mpc a h**-1"))
        pos_kpc = by_id(s["iord"], s["pos"].in_units("kpc"))
        vel = by_id(s["iord"], s["vel"].in_units("km s**-1"))
        mass_file = s["mass"].view(type=np.ndarray)
        mass = s["mass"].in_units("1e10 Msol h**-1")
        mass_msun = s["mass"].in_units("Msol")
        eps = s["eps"].in_units("Mpc a h**-1")
    a = raw["a"]
    name = os.path.basename(path)
    check(abs(props["h"] - H) < 1e-12 and abs(props["omegaM0"] - OMEGA_M) < 1e-12 and
          abs(props["omegaL0"] - OMEGA_L) < 1e-12 and abs(props["omegaB0"] - OMEGA_B) < 1e-12,
          f"pynbody {name}: h, Omega_m, Omega_Lambda, Omega_b = {props['h']}, {props['omegaM0']}, "
          f"{props['omegaL0']}, {props['omegaB0']} (the parameter file's)")
    check(abs(props["a"] - a) < 1e-12, f"pynbody {name}: a = {props['a']:.6f}")
    check(abs(float(box) / BOX - 1) < LENGTH_RTOL, f"pynbody {name}: box = {float(box)} Mpc/h")
    check(close(pos_file, raw["pos"]) and str(pos_units) == "3.09e+24 cm a h**-1",
          f"pynbody {name}: positions as loaded equal the file's, in {pos_units} (Mpc/h comoving)")
    check(close(pos, raw["pos"], rtol=LENGTH_RTOL), f"pynbody {name}: positions in 'Mpc a h**-1'")
    # The unit of length itself: physical kpc = comoving Mpc/h * a / h * 1000.
    check(close(pos_kpc, raw["pos"] * a / H * 1e3, rtol=LENGTH_RTOL),
          f"pynbody {name}: positions in physical kpc = Mpc/h * a / h * 1000")
    check(close(vel, raw["u"] * a**0.5, rtol=1e-9, atol=1e-9),
          f"pynbody {name}: peculiar velocities = sqrt(a) Velocities, km/s")
    check(close(mass_file, raw["mass"]) and close(mass, raw["mass"], rtol=MASS_RTOL) and
          close(mass_msun, raw["mass"] * 1e10 / H, rtol=MASS_RTOL),
          f"pynbody {name}: masses {float(mass[0]):.6g} 1e10 Msun/h = {float(mass_msun[0]):.6g} Msun")
    check(close(eps, SOFTENING_OVER_SPACING * BOX / N_SIDE, rtol=LENGTH_RTOL),
          f"pynbody {name}: softening {float(eps[0]):.6g} Mpc/h (comoving)")
    messages = [str(w.message) for w in caught]
    for m in messages:
        print(f"      pynbody warned: {m}")
    bad = [m for m in messages if re.search(r"default", m, re.IGNORECASE)]
    check(not bad, f"pynbody {name}: no 'default units' / 'assuming default value' warning")
    return s


def check_yt_snapshot(path, raw):
    import yt
    ds = yt.load(path, unit_base={"length": (1.0, "Mpccm/h")})
    ad = ds.all_data()
    name = os.path.basename(path)
    ids = ad["PartType1", "ParticleIDs"].d
    check(close(ds.domain_width.to("Mpccm/h").d, [BOX] * 3),
          f"yt {name}: box {ds.domain_width.to('Mpccm/h')}")
    check(abs(ds.hubble_constant - H) < 1e-12 and abs(ds.omega_matter - OMEGA_M) < 1e-12 and
          abs(ds.omega_lambda - OMEGA_L) < 1e-12,
          f"yt {name}: h, Omega_m, Omega_Lambda = {ds.hubble_constant}, {ds.omega_matter}, {ds.omega_lambda}")
    check(abs(ds.current_redshift - (1 / raw["a"] - 1)) < 1e-9, f"yt {name}: z = {ds.current_redshift:.6f}")
    check(close(by_id(ids, ad["PartType1", "Coordinates"].to("Mpccm/h").d), raw["pos"]),
          f"yt {name}: positions in Mpccm/h equal the file's")
    check(close(by_id(ids, ad["PartType1", "Coordinates"].to("kpc").d), raw["pos"] * raw["a"] / H * 1e3,
                rtol=LENGTH_RTOL),
          f"yt {name}: positions in physical kpc = Mpc/h * a / h * 1000")
    check(close(ad["PartType1", "Masses"].to("Msun/h").d, raw["mass"] * 1e10, rtol=1e-9),
          f"yt {name}: masses = MassTable[1] * 1e10 Msun/h")
    check(close(by_id(ids, ad["PartType1", "Velocities"].to("km/s").d), raw["u"] * raw["a"]**0.5,
                rtol=1e-6, atol=1e-9),
          f"yt {name}: peculiar velocities = sqrt(a) Velocities, km/s")


def check_catalogue(path, raw, s):
    """The fof_tab against the snapshot's particles: GroupMass, GroupVel (GADGET-4: a v_pec),
    GroupLen; then pynbody (members by ID) and yt's gadget_fof reader."""
    import h5py
    import numpy as np
    import yt
    name = os.path.basename(path)
    with h5py.File(path, "r") as f:
        a = float(f["Header"].attrs["Time"])
        length, offset = f["Group/GroupLen"][:], f["Group/GroupOffset"][:]
        group_mass, group_pos, group_vel = f["Group/GroupMass"][:], f["Group/GroupPos"][:], f["Group/GroupVel"][:]
        group_cm, min_pot_id = f["Group/GroupCM"][:], f["Group/GroupMinPotID"][:]
        members = f["IDs/ID"][:]
        params = dict(f["Parameters"].attrs)
    check(len(length) >= 3, f"{name}: {len(length)} groups")
    check(abs(params["BoxSize"] - BOX) < 1e-12 and abs(params["HubbleParam"] - H) < 1e-12 and
          abs(params["Omega0"] - OMEGA_M) < 1e-12 and abs(params["UnitLength_in_cm"] - 3.085678e24) < 1e18,
          f"{name}: /Parameters BoxSize, HubbleParam, Omega0, UnitLength_in_cm")
    check(close(group_mass, length * raw["mass"]), f"{name}: GroupMass = GroupLen x particle mass")
    index = np.searchsorted(raw["ids"], members)
    v_pec = raw["u"][index] * a**0.5
    mean_v = np.array([v_pec[o:o + n].mean(axis=0) for o, n in zip(offset, length)])
    check(close(group_vel / a, mean_v, rtol=1e-9, atol=1e-9),
          f"{name}: GroupVel / a = members' mean peculiar velocity (GADGET-4's GroupVel = a v_pec), a = {a:.4f}")
    # GroupPos: the minimum-potential member's position (GADGET-4); GroupCM: the members'
    # periodic mean around the first member. Snapshot coordinates may be single precision.
    check(all(i in members[o:o + n] for i, o, n in zip(min_pot_id, offset, length)) and
          close(group_pos, raw["pos"][np.searchsorted(raw["ids"], min_pot_id)], rtol=1e-6, atol=1e-5),
          f"{name}: GroupPos = the position of member GroupMinPotID")
    cm = []
    for o, n in zip(offset, length):
        x = raw["pos"][index[o:o + n]]
        d = x - x[0]
        d -= BOX * np.round(d / BOX)
        cm.append((x[0] + d.mean(axis=0)) % BOX)
    off = group_cm - np.array(cm)
    off -= BOX * np.round(off / BOX)   # periodic: a centre at 0 may read BOX here
    check(np.all(np.abs(off) < 1e-5), f"{name}: GroupCM = the members' centre of mass")
    g = 0
    halo = s[np.isin(s["iord"], members[offset[g]:offset[g] + length[g]])]
    check(len(halo) == length[g] and close(halo["mass"].view(type=np.ndarray).sum(), group_mass[g]),
          f"pynbody: group 0's members by ID: {len(halo)} particles, its GroupMass")

    # yt's gadget_fof reader wants the multi-file name NAME.0.hdf5.
    alias = path[:-len(".hdf5")] + ".0.hdf5"
    os.symlink(os.path.basename(path), alias)
    cat = yt.load(alias)
    ad = cat.all_data()
    check(close(cat.domain_width.to("Mpccm/h").d, [BOX] * 3) and abs(cat.hubble_constant - H) < 1e-12 and
          abs(cat.omega_matter - OMEGA_M) < 1e-12 and abs(cat.omega_lambda - OMEGA_L) < 1e-12,
          f"yt {name}: box {cat.domain_width.to('Mpccm/h')}, h, Omega_m, Omega_Lambda")
    check(close(ad["Group", "particle_position"].to("Mpccm/h").d, group_pos),
          f"yt {name}: group positions in Mpccm/h")
    check(close(ad["Group", "particle_mass"].to("Msun/h").d, group_mass * 1e10, rtol=1e-9),
          f"yt {name}: group masses = GroupMass * 1e10 Msun/h")
    os.remove(alias)   # the README's block makes its own


def readme_blocks():
    """The ```python blocks of the README's "Outputs" section, in order."""
    with open(README) as f:
        text = f.read()
    section = re.search(r"^## Outputs\n(.*?)(?=^## )", text, re.DOTALL | re.MULTILINE)
    return re.findall(r"^```python\n(.*?)^```", section.group(1), re.DOTALL | re.MULTILINE) if section else []


def check_readme(raw):
    """Runs the README's blocks (they read output/demo/..., here this test's files) one after
    another in one namespace, and checks what each leaves behind."""
    import numpy as np
    blocks = readme_blocks()
    check(len(blocks) >= 4, f"README 'Outputs': {len(blocks)} python blocks")
    namespace = {}
    for i, block in enumerate(blocks):
        for key in ("pos", "box"):
            namespace.pop(key, None)
        try:
            exec(compile(block, f"README.md Outputs block {i + 1}", "exec"), namespace)
        except Exception as e:   # report and go on to the next block
            check(False, f"README block {i + 1} runs: {type(e).__name__}: {e}")
            continue
        what = f"README block {i + 1} ({block.splitlines()[0]})"
        if "pos" in namespace and "ids" not in block:
            pos = np.asarray(namespace["pos"])
            check(close(np.sort(pos, axis=0), np.sort(raw["pos"], axis=0), rtol=LENGTH_RTOL),
                  f"{what}: pos = the file's, Mpc/h")
        elif "pos" in namespace:
            check(close(by_id(namespace["ids"], namespace["pos"]), raw["pos"], rtol=LENGTH_RTOL),
                  f"{what}: pos = the file's, Mpc/h")
        if "box" in namespace:
            check(close(namespace["box"], BOX, rtol=LENGTH_RTOL), f"{what}: box = {BOX} Mpc/h")
        if "group_pos" in namespace:
            check(len(namespace["group_pos"]) >= 3, f"{what}: group_pos has the groups")
    check("halo" in namespace and "n" in namespace and len(namespace["halo"]) == namespace["n"] > 0,
          "README: the largest group's particles in pynbody, as many as its GroupLen")


# An isolated galaxy of three types (written here as DICE or GalIC write one): halo (type 1,
# MassTable), disc (type 2, its own masses), bulge (type 4, MassTable); galaxy units.
GALAXY_COUNTS = {1: 60, 2: 40, 4: 20}
GALAXY_TABLE = [0.0, 0.02, 0.0, 0.0, 0.005, 0.0]   # 1e10 Msun
GALAXY_PARAMETERS = """
[ic]
file = "galaxy.hdf5"
[gravity]
boundary = "vacuum"
softening = 0.1
solver = "direct"
[time]
t_end = 0.002
max_dt = 0.001
[output]
directory = "galaxy"
"""


def write_galaxy(path):
    import h5py
    import numpy as np
    rng = np.random.default_rng(31)
    counts = [GALAXY_COUNTS.get(t, 0) for t in range(6)]
    with h5py.File(path, "w") as f:
        h = f.create_group("Header")
        h.attrs["NumPart_ThisFile"] = np.array(counts, dtype=np.uint32)
        h.attrs["NumPart_Total"] = np.array(counts, dtype=np.uint32)
        h.attrs["NumPart_Total_HighWord"] = np.zeros(6, dtype=np.uint32)
        h.attrs["MassTable"] = np.array(GALAXY_TABLE)
        h.attrs["Time"] = 0.0
        h.attrs["NumFilesPerSnapshot"] = 1
        h.attrs["UnitLength_in_cm"] = 3.085678e21
        h.attrs["UnitMass_in_g"] = 1.989e43
        h.attrs["UnitVelocity_in_cm_per_s"] = 1e5
        first = 1
        for t, n in GALAXY_COUNTS.items():
            g = f.create_group(f"PartType{t}")
            g["Coordinates"] = rng.uniform(-5, 5, (n, 3))
            g["Velocities"] = rng.uniform(-20, 20, (n, 3))
            g["ParticleIDs"] = np.arange(first, first + n, dtype=np.uint64)
            first += n
            if GALAXY_TABLE[t] == 0:
                g["Masses"] = 0.01 + 1e-4 * np.arange(n)


def check_isolated_types(orbis):
    """A run from a file of three types: its snapshot's types and masses through h5py, pynbody, yt."""
    import h5py
    import numpy as np
    import pynbody
    import yt
    write_galaxy("galaxy.hdf5")
    with open("galaxy.toml", "w") as f:
        f.write(GALAXY_PARAMETERS)
    run = subprocess.run([orbis, "run", "galaxy.toml"], capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stdout, run.stderr)
    check(run.returncode == 0, "orbis run galaxy.toml (three types, individual masses)")
    path = "galaxy/snapshot_000.hdf5"
    disc = 0.01 + 1e-4 * np.arange(GALAXY_COUNTS[2])   # 1e10 Msun, in ID order
    with h5py.File(path, "r") as f:
        check([int(c) for c in f["Header"].attrs["NumPart_Total"]] == [GALAXY_COUNTS.get(t, 0) for t in range(6)],
              f"{path}: NumPart_Total per type")
        check(close(f["Header"].attrs["MassTable"], np.array(GALAXY_TABLE), rtol=0),
              f"{path}: MassTable {GALAXY_TABLE}")
        check("Masses" in f["PartType2"] and "Masses" not in f["PartType1"] and "Masses" not in f["PartType4"],
              f"{path}: /PartType2/Masses only")
        check(close(f["PartType2/Masses"][:][np.argsort(f["PartType2/ParticleIDs"][:])], disc, rtol=0),
              f"{path}: the disc's masses as the file gave them")
    total = GALAXY_COUNTS[1] * GALAXY_TABLE[1] + disc.sum() + GALAXY_COUNTS[4] * GALAXY_TABLE[4]
    s = pynbody.load(path)
    check(len(s) == 120 and len(s.dm) == 100 and len(s.star) == 20,
          f"pynbody {path}: 100 dark-matter particles (types 1 and 2) and 20 stars (type 4)")
    check(close(s["mass"].in_units("Msol").sum(), total * 1e10, rtol=MASS_RTOL),
          f"pynbody {path}: total mass {total * 1e10:.6g} Msun")
    check(close(s.star["mass"].in_units("Msol"), GALAXY_TABLE[4] * 1e10, rtol=MASS_RTOL),
          f"pynbody {path}: the stars' mass from MassTable[4]")
    ad = yt.load(path).all_data()
    order = np.argsort(ad["PartType2", "ParticleIDs"].d)
    check(close(ad["PartType2", "Masses"].to("Msun").d[order], disc * 1e10, rtol=MASS_RTOL),
          f"yt {path}: the disc's Masses in Msun")
    check(close(ad["PartType1", "Masses"].to("Msun").d, GALAXY_TABLE[1] * 1e10, rtol=MASS_RTOL),
          f"yt {path}: the halo's mass from MassTable[1]")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    orbis = os.path.abspath(sys.argv[1])
    import_readers()
    import numpy as np
    work = tempfile.mkdtemp(prefix="orbis_ecosystem_")
    try:
        os.chdir(work)
        with open("small.toml", "w") as f:
            f.write(PARAMETERS)
        run = subprocess.run([orbis, "run", "small.toml"], capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stdout, run.stderr)
            check(False, "orbis run small.toml")
            return 1
        ic = subprocess.run([orbis, "ic", "small.toml", "--set", "output.directory=ics"],
                            capture_output=True, text=True)
        check(ic.returncode == 0, "orbis ic small.toml")
        # The same ICs in three files (as a run on several ranks writes them, one file per
        # writer rank): pynbody reads the set by its stem, yt by its first file.
        split = subprocess.run([orbis, "ic", "small.toml", "--set", "output.directory=ics_split",
                                "--set", "output.files_per_snapshot=3"], capture_output=True, text=True)
        check(split.returncode == 0, "orbis ic small.toml in 3 files")
        import pynbody, yt
        print(f"python {sys.version.split()[0]}, pynbody {pynbody.__version__}, yt {yt.__version__}, "
              f"numpy {np.__version__}")
        yt.set_log_level(40)

        # The particle mass from the parameter file alone: Omega_m rho_crit L^3 / N.
        expected_mass = OMEGA_M * RHO_CRIT * BOX**3 / N_SIDE**3
        snapshots = ["output/demo/snapshot_002.hdf5", "output/demo/snapshot_003.hdf5", "ics/ics.hdf5"]
        for path in snapshots:
            raw = raw_snapshot(path)
            check(abs(raw["mass"] / expected_mass - 1) < 1e-3,
                  f"{path}: particle mass {raw['mass']:.6g} = Omega_m rho_crit L^3 / N ({expected_mass:.6g})")
            s = attempt(f"pynbody {path}", check_pynbody_snapshot, path, raw)
            attempt(f"yt {path}", check_yt_snapshot, path, raw)
            if "ics" not in path and s is not None:
                attempt(f"catalogue of {path}", check_catalogue, path.replace("snapshot_", "fof_tab_"), raw, s)
        raw = raw_snapshot("ics/ics.hdf5")
        check_split_snapshot("ics_split/ics", 3, raw)
        attempt("pynbody ics_split/ics (3 files)", check_pynbody_snapshot, "ics_split/ics", raw)
        attempt("yt ics_split/ics.0.hdf5 (3 files)", check_yt_snapshot, "ics_split/ics.0.hdf5", raw)
        check_readme(raw_snapshot("output/demo/snapshot_003.hdf5"))
        attempt("an isolated system of three types", check_isolated_types, orbis)
    finally:
        os.chdir("/")
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'FAILED' if failures else 'passed'}: {len(failures)} of the checks failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
