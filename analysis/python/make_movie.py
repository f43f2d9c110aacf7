#!/usr/bin/env python3
"""A movie of a run's projected-density frames (the PNGs project_snapshots.py writes).

usage: make_movie.py RUN_DIR_OR_PNGS... [--out FILE] [--fps N]

The frames: a folder's snapshot_NNN.png in snapshot order, or the PNG files given, in that
order. The movie: with ffmpeg on the PATH, an MP4 (H.264 where ffmpeg has it); otherwise an
animated GIF written with Pillow (python3-pil, which matplotlib's PillowWriter also needs).
--out names it (a .gif asks for the GIF even where ffmpeg is present); by default
RUN_DIR/movie.mp4, or movie.gif without ffmpeg. Without either it says what to install.

Example (the merger of params/hernquist_merger.toml: 31 snapshots, 1.5 time units):
  orbis run params/hernquist_merger.toml
  python3 analysis/python/project_snapshots.py output_merger --extent 120
  python3 analysis/python/make_movie.py output_merger --fps 8
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

FRAME = re.compile(r"^snapshot_(\d+)\.png$")


def find_frames(inputs):
    frames = []
    for path in inputs:
        if os.path.isdir(path):
            found = [f for f in glob.glob(os.path.join(path, "snapshot_*.png")) if FRAME.match(os.path.basename(f))]
            frames += sorted(found, key=lambda f: int(FRAME.match(os.path.basename(f)).group(1)))
        elif os.path.isfile(path):
            frames.append(path)
        else:
            sys.exit(f"{path}: no such PNG file or folder")
    if not frames:
        sys.exit(f"{' '.join(inputs)}: no snapshot_NNN.png frames (make them with project_snapshots.py)")
    return frames


def have_pillow():
    try:
        import PIL.Image  # noqa: F401
        return True
    except ImportError:
        return False


def write_mp4(frames, out, fps, ffmpeg):
    """ffmpeg reads numbered frames: links (copies where links fail) named frame_00000.png ..."""
    with tempfile.TemporaryDirectory() as work:
        for k, frame in enumerate(frames):
            link = os.path.join(work, f"frame_{k:05d}.png")
            try:
                os.symlink(os.path.abspath(frame), link)
            except OSError:
                shutil.copyfile(frame, link)
        common = [ffmpeg, "-y", "-loglevel", "error", "-framerate", str(fps), "-i", os.path.join(work, "frame_%05d.png"),
                  "-vf", "scale=trunc(iw/2)*2:trunc(ih/2)*2", "-pix_fmt", "yuv420p"]
        # H.264 where this ffmpeg has it (libx264), else the container's default encoder.
        for codec in (["-c:v", "libx264"], []):
            result = subprocess.run(common + codec + [out], capture_output=True, text=True)
            if result.returncode == 0:
                return
        sys.exit(f"{ffmpeg} could not write {out}: {result.stderr.strip()}")


def write_gif(frames, out, fps):
    from PIL import Image
    images = [Image.open(frame).convert("RGB") for frame in frames]
    # An adaptive palette per frame; duration in milliseconds per frame, looped forever.
    images = [image.convert("P", palette=Image.Palette.ADAPTIVE) for image in images]
    images[0].save(out, save_all=True, append_images=images[1:], duration=max(1, round(1000 / fps)), loop=0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", help="a folder of snapshot_NNN.png, or PNG files")
    parser.add_argument("--out", help="the movie: .mp4 (ffmpeg) or .gif (Pillow); default FOLDER/movie.mp4 or .gif")
    parser.add_argument("--fps", type=float, default=10.0, help="frames per second (default 10)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not args.fps > 0:
        parser.error(f"--fps {args.fps}: expected a positive number of frames per second")
    frames = find_frames(args.inputs)
    ffmpeg = shutil.which("ffmpeg")
    pillow = have_pillow()
    out = args.out
    if out is None:
        folder = args.inputs[0] if os.path.isdir(args.inputs[0]) else os.path.dirname(frames[0])
        out = os.path.join(folder, "movie.mp4" if ffmpeg or not pillow else "movie.gif")
    wants_gif = out.lower().endswith(".gif")
    if wants_gif and pillow:
        write_gif(frames, out, args.fps)
    elif not wants_gif and ffmpeg:
        write_mp4(frames, out, args.fps, ffmpeg)
    elif wants_gif:
        sys.exit(f"cannot write {out}: {sys.executable} cannot import Pillow (PIL); install it (Debian: "
                 f"apt-get install python3-pil; pip: pip install pillow), or install ffmpeg and ask for an .mp4")
    else:
        sys.exit(f"cannot write {out}: no ffmpeg on the PATH; install it (Debian: apt-get install ffmpeg)" +
                 (", or ask for a .gif (--out movie.gif), which Pillow writes" if pillow else
                  f", or Pillow for a .gif ({sys.executable} cannot import PIL: apt-get install python3-pil)"))
    print(f"wrote {out} ({len(frames)} frames at {args.fps:g} per second)")
    return out


if __name__ == "__main__":
    main()
