#!/usr/bin/env python3
"""The projected-density frames of analysis/python/project_snapshots.py and their movie.

usage: test_projected_images.py ORBIS_BINARY

1. A run: orbis on a Plummer sphere of 2000 particles in vacuum (N-body units, three
   outputs, about a second). Its frames: one PNG per snapshot, of the size asked for, not
   blank; the brightest pixel of the first frame (a grey colour map, so brightness is the
   surface density; pixels of 0.53 scale radii, where 2000 particles put the peak at the
   centre) within one pixel of the pixel of the centre of mass computed here; the labels
   drawn only near the top and bottom edges; the movie (a GIF with Pillow, an MP4 if
   ffmpeg is on the PATH) has one frame per snapshot.
2. The projection itself, against particles written here: two point clumps (3 and 1 mass
   units; one PartType with individual Masses, one with a MassTable mass) in a vacuum file,
   imaged along z, x and y, and split over two files (a snapshot of files_per_snapshot = 2),
   and a clump in a periodic box straddling its edge. Each clump must
   land in the pixel computed here from its position, the field (centre of mass, --extent)
   and the image's orientation (first coordinate to the right, second up), at the grey level
   of the logarithmic scale; every other pixel must be empty.

Needs numpy, h5py and matplotlib (tests/ecosystem/requirements.txt, or Debian's python3-numpy,
python3-h5py, python3-matplotlib): without them it prints why and exits 77, which CTest
reports as skipped -- unless ORBIS_ECOSYSTEM_REQUIRED=1 (CI), then it fails.
"""
import glob
import math
import os
import shutil
import subprocess
import sys
import tempfile

SKIPPED = 77
HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "analysis", "python")
PROJECT = os.path.join(TOOLS, "project_snapshots.py")
MOVIE = os.path.join(TOOLS, "make_movie.py")

PARAMETERS = """
[ic]
kind = "plummer"
particles = 2000
mass = 1.0
scale_radius = 0.25
seed = 7
[units]
system = "nbody"
[gravity]
boundary = "vacuum"
solver = "fmm"
softening = 0.01
[time]
t_end = 0.2
max_dt = 0.01
output_interval = 0.1
[output]
directory = "run"
"""
SNAPSHOTS = 3          # t = 0, 0.1, 0.2

failures = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        failures.append(what)


def skip_or_fail(message):
    if os.environ.get("ORBIS_ECOSYSTEM_REQUIRED") == "1":
        print(f"FAIL: {message} (ORBIS_ECOSYSTEM_REQUIRED=1)")
        sys.exit(1)
    print(f"SKIPPED: {message}")
    sys.exit(SKIPPED)


def import_tools():
    missing = []
    for name in ("numpy", "h5py", "matplotlib"):
        try:
            __import__(name)
        except ImportError as e:
            missing.append(f"{name} ({e})")
    if missing:
        skip_or_fail(f"{sys.executable} cannot import {', '.join(missing)}; install them with "
                     f"`python3 -m venv .venv-ecosystem && .venv-ecosystem/bin/pip install -r "
                     f"tests/ecosystem/requirements.txt` (or apt-get install python3-numpy python3-h5py "
                     f"python3-matplotlib) and configure again")


def run(command, cwd):
    print("$", " ".join(command))
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stdout + result.stderr)
        check(False, f"{os.path.basename(command[1] if command[0] == sys.executable else command[0])} exited "
                     f"{result.returncode}")
        report()
    return result.stdout


def report():
    if failures:
        print(f"{len(failures)} check(s) failed:")
        for what in failures:
            print("  " + what)
        sys.exit(1)
    print("all checks passed")
    sys.exit(0)


def grey(path):
    """The PNG as grey levels 0..255 (rows from the top), from its red channel."""
    import matplotlib.image
    import numpy as np
    image = matplotlib.image.imread(path)
    return image, np.rint(image[..., 0] * 255).astype(int)


def pixel_of(u, v, left, bottom, width, pixels):
    """(row from the top, column) of the point (u, v) of the plane, and how far inside its pixel
    it is (the test's own positions must not sit on a pixel edge)."""
    fu, fv = (u - left) / width * pixels, (v - bottom) / width * pixels
    margin = min(fu - math.floor(fu), math.ceil(fu) - fu, fv - math.floor(fv), math.ceil(fv) - fv)
    return (pixels - 1 - int(math.floor(fv)), int(math.floor(fu))), margin


def check_run(workdir, orbis):
    import h5py
    import numpy as np
    with open(os.path.join(workdir, "params.toml"), "w") as f:
        f.write(PARAMETERS)
    env_threads = os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(f"OMP_NUM_THREADS={env_threads}")
    run([orbis, "run", "params.toml"], workdir)
    folder = os.path.join(workdir, "run")
    snapshots = sorted(glob.glob(os.path.join(folder, "snapshot_*.hdf5")))
    check(len(snapshots) == SNAPSHOTS, f"orbis wrote {len(snapshots)} snapshots, expected {SNAPSHOTS}")

    # Default look (inferno, labels), beside the snapshots.
    pixels = 101
    run([sys.executable, PROJECT, folder, "--pixels", str(pixels)], workdir)
    frames = sorted(glob.glob(os.path.join(folder, "snapshot_*.png")))
    check([os.path.splitext(f)[0] for f in frames] == [os.path.splitext(s)[0] for s in snapshots],
          f"one PNG beside each snapshot ({len(frames)} for {len(snapshots)})")
    for frame in frames:
        image, _ = grey(frame)
        colours = len(np.unique(image.reshape(-1, image.shape[-1]), axis=0))
        check(image.shape[:2] == (pixels, pixels) and colours > 10,
              f"{os.path.basename(frame)}: {image.shape[1]} x {image.shape[0]} pixels (expected {pixels} x {pixels}), "
              f"{colours} colours (not blank)")

    # The labels: only near the top and bottom edges (against the same frames without them).
    bare_dir = os.path.join(workdir, "bare")
    run([sys.executable, PROJECT, folder, "--pixels", str(pixels), "--no-labels", "--out", bare_dir], workdir)
    for frame in frames:
        name = os.path.basename(frame)
        labelled, bare = grey(frame)[0], grey(os.path.join(bare_dir, name))[0]
        rows = np.nonzero(np.any(np.abs(labelled - bare) > 1e-6, axis=(1, 2)))[0]
        check(len(rows) > 0 and bool(np.all((rows < pixels // 4) | (rows >= pixels - pixels // 4))),
              f"{name}: the labels differ from the bare frame, only in the top and bottom quarters "
              f"(rows {rows.min() if len(rows) else '-'}..{rows.max() if len(rows) else '-'})")

    # Grey scale: brightness is the surface density. The field: --extent about the centre of mass.
    extent, small = 2.0, 15
    grey_dir = os.path.join(workdir, "grey")
    run([sys.executable, PROJECT, folder, "--pixels", str(small), "--extent", str(extent), "--cmap", "gray",
         "--no-labels", "--out", grey_dir], workdir)
    with h5py.File(snapshots[0], "r") as f:
        x = f["PartType1/Coordinates"][:]
        m = np.full(len(x), float(f["Header"].attrs["MassTable"][1]))
    com = (x * m[:, None]).sum(axis=0) / m.sum()
    (row, col), _ = pixel_of(com[0], com[1], com[0] - extent / 2, com[1] - extent / 2, extent, small)
    levels = [grey(os.path.join(grey_dir, os.path.basename(f)))[1] for f in frames]
    peak = np.argwhere(levels[0] == levels[0].max())
    distance = int(np.max(np.abs(peak - [row, col])))
    check(distance <= 1, f"first frame: brightest pixel(s) {peak.tolist()} within 1 pixel of the centre of mass's "
                         f"pixel ({row}, {col}) (off by {distance})")
    brightest = max(int(level.max()) for level in levels)
    check(brightest == 255, f"the brightest pixel of the run at the top of the grey scale ({brightest})")

    # The movie.
    try:
        from PIL import Image
        gif = os.path.join(workdir, "run.gif")
        run([sys.executable, MOVIE, folder, "--out", gif, "--fps", "5"], workdir)
        with Image.open(gif) as movie:
            check(movie.n_frames == SNAPSHOTS and movie.size == (pixels, pixels),
                  f"GIF: {movie.n_frames} frames of {movie.size} (expected {SNAPSHOTS} of {(pixels, pixels)})")
    except ImportError:
        print(f"(no GIF check: {sys.executable} has no Pillow)")
    if shutil.which("ffmpeg"):
        mp4 = os.path.join(workdir, "run.mp4")
        run([sys.executable, MOVIE, folder, "--out", mp4], workdir)
        check(os.path.getsize(mp4) > 1000, f"MP4: {os.path.getsize(mp4)} bytes")
    else:
        print("(no MP4 check: no ffmpeg on the PATH)")


def write_gadget(path, groups, box=0.0, time=1.5, redshift=0.0):
    """A GADGET-4 HDF5 snapshot: groups = {type: (positions, masses or None, table mass)}."""
    import h5py
    import numpy as np
    counts, table = np.zeros(6, dtype=np.uint64), np.zeros(6)
    with h5py.File(path, "w") as f:
        for t, (x, masses, mass) in groups.items():
            g = f.create_group(f"PartType{t}")
            g["Coordinates"] = np.asarray(x, dtype=float)
            g["ParticleIDs"] = np.arange(len(x), dtype=np.uint64)
            if masses is not None:
                g["Masses"] = np.asarray(masses, dtype=float)
            table[t] = mass
            counts[t] = len(x)
        h = f.create_group("Header")
        for key, value in (("BoxSize", box), ("Time", time), ("Redshift", redshift), ("MassTable", table),
                           ("NumPart_ThisFile", counts), ("NumPart_Total", counts), ("NumFilesPerSnapshot", 1)):
            h.attrs[key] = value


def check_clumps(workdir):
    """Two point clumps at known places: their pixels and grey levels, computed here."""
    import numpy as np
    a, b = np.array([2.3, -1.6, 0.7]), np.array([-3.4, 2.9, -2.2])
    # Clump a: 10 particles of 0.3 with individual masses (PartType1/Masses); clump b: 20 of 0.05
    # from the MassTable (PartType2). Unequal masses: the centre of mass is not the mean position.
    clump_a = {1: (np.tile(a, (10, 1)), np.full(10, 0.3), 0.0)}
    clump_b = {2: (np.tile(b, (20, 1)), None, 0.05)}
    single, split = os.path.join(workdir, "clumps"), os.path.join(workdir, "clumps_split")
    os.makedirs(single)
    os.makedirs(split)
    write_gadget(os.path.join(single, "snapshot_000.hdf5"), {**clump_a, **clump_b})
    # The same snapshot as a set of two files (files_per_snapshot = 2): one clump in each.
    write_gadget(os.path.join(split, "snapshot_000.0.hdf5"), clump_a)
    write_gadget(os.path.join(split, "snapshot_000.1.hdf5"), clump_b)
    com = (3.0 * a + 1.0 * b) / 4.0
    extent, pixels = 12.0, 24
    # Levels of the log scale: from half the faintest pixel (b, 1 unit) to the brightest (a, 3).
    level_b = int(math.log(2.0) / math.log(6.0) * 256)
    for folder, axis, (i, j) in ((single, "z", (0, 1)), (single, "x", (1, 2)), (single, "y", (2, 0)),
                                 (split, "z", (0, 1))):
        out = os.path.join(workdir, f"{os.path.basename(folder)}_{axis}")
        run([sys.executable, PROJECT, folder, "--axis", axis, "--extent", str(extent), "--pixels", str(pixels),
             "--cmap", "gray", "--no-labels", "--out", out], workdir)
        _, level = grey(os.path.join(out, "snapshot_000.png"))
        left, bottom = com[i] - extent / 2, com[j] - extent / 2
        pa, margin_a = pixel_of(a[i], a[j], left, bottom, extent, pixels)
        pb, margin_b = pixel_of(b[i], b[j], left, bottom, extent, pixels)
        assert min(margin_a, margin_b) > 0.1, "the test's clumps must sit inside their pixels, not on an edge"
        expected = np.zeros((pixels, pixels), dtype=int)
        expected[pa], expected[pb] = 255, level_b
        wrong = np.argwhere(np.abs(level - expected) > 1)
        check(len(wrong) == 0 and level.shape == expected.shape,
              f"{os.path.basename(folder)} --axis {axis}: clump a (3 units) at pixel {pa} at grey 255, clump b "
              f"(1 unit) at {pb} at grey {level_b}, every other pixel empty (wrong pixels: "
              f"{[(tuple(p), level[tuple(p)]) for p in wrong[:6]]})")

    # A periodic box (BoxSize 10, z = 2): the field is the box; a clump straddling x = 0 wraps.
    folder = os.path.join(workdir, "periodic")
    os.makedirs(folder)
    box, pixels = 10.0, 10
    x = np.array([[9.75, 3.25, 5.0]] * 4 + [[-0.25, 3.25, 5.0]] * 4 + [[4.5, 8.5, 1.0]] * 2)
    write_gadget(os.path.join(folder, "snapshot_000.hdf5"), {1: (x, None, 0.5)}, box=box, time=1 / 3, redshift=2.0)
    run([sys.executable, PROJECT, folder, "--pixels", str(pixels), "--cmap", "gray", "--no-labels"], workdir)
    _, level = grey(os.path.join(folder, "snapshot_000.png"))
    expected = np.zeros((pixels, pixels), dtype=int)
    expected[pixels - 1 - 3, 9] = 255                                      # 8 particles, wrapped
    expected[pixels - 1 - 8, 4] = int(math.log(2.0) / math.log(8.0) * 256)  # 2 particles
    wrong = np.argwhere(np.abs(level - expected) > 1)
    check(len(wrong) == 0, f"periodic box: the field is the box, the clump across x = 0 wrapped into pixel (6, 9), "
                           f"the other at (1, 4) (wrong pixels: {[(tuple(p), level[tuple(p)]) for p in wrong[:6]]})")


def main():
    if len(sys.argv) != 2 or not os.access(sys.argv[1], os.X_OK):
        sys.exit(__doc__)
    orbis = os.path.abspath(sys.argv[1])
    import_tools()
    with tempfile.TemporaryDirectory(prefix="orbis_images_") as workdir:
        check_clumps(workdir)
        check_run(workdir, orbis)
    report()


if __name__ == "__main__":
    main()
