"""The interpreter the benchmarks time webtap with: webtap installed from a wheel, as a user
gets it, in bench-out/wheel-venv.

Why: the development install is an editable meson-python install. Its import hook checks the
build (runs ninja) every time `webtap` is first imported, ~0.1-0.2 s per process that a user
installing the wheel never pays, and which would be counted in every "process" time.

    python -m benchmarks.wheel_env [VENV]   # builds the wheel, (re)creates the venv (default
                                            # bench-out/wheel-venv), prints its python

`make demo` uses it too (VENV build/user-venv): the demo's commands run as a user's install has
them, while the tests keep the editable install (which rebuilds what changed on import).

The venv has no packages of its own besides webtap: a .pth line puts the development venv's
site-packages (numpy, pyarrow, ...) after it on sys.path. Only the development venv's own .pth
files (the editable hook among them) are not run, since that directory is not a site directory
of the bench venv. `make bench` sets WEBTAP_BENCH_PYTHON to the printed path.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import sysconfig

from benchmarks.common import OUT, REPO


def _newest_source() -> float:
    files = [REPO / "meson.build", REPO / "pyproject.toml"]
    for d in ("ext", "webtap", "httpanalyzer", "urlfilter"):
        files += [p for p in (REPO / d).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return max(p.stat().st_mtime for p in files)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    wheel_dir = OUT / "wheel"
    venv = OUT / "wheel-venv" if not argv else (REPO / argv[0]).resolve()
    wheels = glob.glob(str(wheel_dir / "webtap-*.whl"))
    # Up to date when built from sources no newer than now: the newest source time is taken
    # before the build starts and kept beside the wheel (comparing with the wheel file's own
    # time missed a source saved while a build ran: the wheel held the older compiled module)
    stamp_src = wheel_dir / "sources-mtime.txt"
    newest = _newest_source()
    built_from = float(stamp_src.read_text()) if stamp_src.exists() else -1.0
    if len(wheels) != 1 or built_from < newest:
        shutil.rmtree(wheel_dir, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                        "-w", str(wheel_dir), str(REPO)], check=True, stdout=sys.stderr)
        stamp_src.write_text(repr(newest))
    wheels = glob.glob(str(wheel_dir / "webtap-*.whl"))
    if len(wheels) != 1:
        sys.exit(f"expected one webtap wheel in {wheel_dir}, found {wheels}")
    py = venv / "bin" / "python"
    stamp = venv / "webtap-wheel.txt"
    built = f"{wheels[0]} {os.path.getmtime(wheels[0])}"
    if py.exists() and stamp.exists() and stamp.read_text() == built:
        print(py)                                  # this wheel is installed already
        return 0
    subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(venv)], check=True)
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    dev_site = sysconfig.get_paths()["purelib"]
    with open(os.path.join(purelib, "webtap-bench-deps.pth"), "w") as f:
        f.write(dev_site + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                    "--no-index", wheels[0]], check=True, stdout=sys.stderr)
    # the installed webtap must be the wheel's, not the editable one
    where = subprocess.run([str(py), "-c", "import webtap, httpanalyzer; print(webtap.__file__)"],
                           check=True, capture_output=True, text=True, cwd=OUT).stdout.strip()
    if not where.startswith(purelib):
        sys.exit(f"bench venv imports webtap from {where}, not from {purelib}")
    stamp.write_text(built)
    print(py)
    return 0


if __name__ == "__main__":
    sys.exit(main())
