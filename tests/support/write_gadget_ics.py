#!/usr/bin/env python3
"""Write a small IC file the way GADGET-4's N-GenIC does, independently of orbis.

usage: write_gadget_ics.py OUT_BASE N_SIDE NFILES [kpc]
Particles sit on a grid displaced by a known field; IDs are 32-bit, 1-based in grid order
(ID-1 = (ix*N + iy)*N + iz); coordinates float32; particles shuffled; velocities
u = v_pec/sqrt(a); no NumPart_Total_HighWord; cosmology only in /Parameters. With NFILES > 1
the set is split into OUT_BASE.0.hdf5, OUT_BASE.1.hdf5, ... The expected values are written
to OUT_BASE.expected.txt: one line per particle "id x y z vx vy vz" in ID order, in Mpc/h and
km/s. With "kpc" the file itself uses GADGET's kpc/h, 1e10 Msun/h and m/s (unusual but legal)
units, recorded in /Parameters, so a reader must convert.
"""
import sys

import h5py
import numpy as np

base, n, nfiles = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
kpc = len(sys.argv) > 4 and sys.argv[4] == "kpc"
length_unit, velocity_unit = (1e-3, 1e-3) if kpc else (1.0, 1.0)   # file unit in Mpc/h, km/s
box, a, mass = 50.0, 0.02, 12.5
ix, iy, iz = np.meshgrid(np.arange(n), np.arange(n), np.arange(n), indexing="ij")
q = np.stack([ix, iy, iz], axis=-1).reshape(-1, 3) * (box / n)
ids = (np.arange(n**3) + 1).astype(np.uint32)
disp = 0.3 * np.stack([np.sin(2 * np.pi * q[:, 1] / box), np.cos(2 * np.pi * q[:, 2] / box),
                       np.sin(2 * np.pi * q[:, 0] / box)], axis=-1)
pos = np.mod(q + disp, box).astype(np.float32)
vel = 40.0 * disp  # u in km/s
order = np.random.default_rng(1).permutation(n**3)
pos, vel, ids = pos[order], vel[order], ids[order]

chunks = np.array_split(np.arange(n**3), nfiles)
for f, idx in enumerate(chunks):
    name = base + (f".{f}.hdf5" if nfiles > 1 else ".hdf5")
    with h5py.File(name, "w") as h:
        hd = h.create_group("Header")
        hd.attrs["BoxSize"] = box / length_unit
        hd.attrs["Time"] = a
        hd.attrs["Redshift"] = 1 / a - 1
        hd.attrs["NumPart_ThisFile"] = np.array([0, len(idx), 0, 0, 0, 0], dtype=np.uint32)
        hd.attrs["NumPart_Total"] = np.array([0, n**3, 0, 0, 0, 0], dtype=np.uint32)
        hd.attrs["MassTable"] = np.array([0, mass, 0, 0, 0, 0], dtype=np.float64)
        hd.attrs["NumFilesPerSnapshot"] = np.int32(nfiles)
        par = h.create_group("Parameters")
        par.attrs["Omega0"] = 0.3
        par.attrs["OmegaLambda"] = 0.7
        par.attrs["HubbleParam"] = 0.7
        par.attrs["UnitLength_in_cm"] = 3.085678e24 * length_unit
        par.attrs["UnitVelocity_in_cm_per_s"] = 1e5 * velocity_unit
        g = h.create_group("PartType1")
        g["Coordinates"] = (pos[idx].astype(np.float64) / length_unit).astype(np.float32)
        g["Velocities"] = (vel[idx] / velocity_unit).astype(np.float32)
        g["ParticleIDs"] = ids[idx]

sort = np.argsort(ids)
with open(base + ".expected.txt", "w") as out:
    for i in sort:
        out.write("%d %.9g %.9g %.9g %.9g %.9g %.9g\n" % (ids[i], *pos[i], *vel[i].astype(np.float32)))
