#!/usr/bin/env python3
"""How long installing the packages takes, the ways users install them (issue 56).

    scripts/build-wheel.sh target/release-wheels && scripts/build-npm.sh target/release-wheels
    python3 bench/install.py target/release-wheels            # 7 runs of each
    python3 bench/install.py target/release-wheels --runs 15

Each run installs into a fresh temporary folder, offline, with a temporary HOME:
  pip        pip install --no-index WHEEL into a venv made just before (python3 -m venv,
             not timed: it is the line "venv alone", ensurepip included)
  uv tool    uv tool install --offline WHEEL (its cache fresh each run: nothing reused)
  pipx       pipx install --pip-args=--no-index WHEEL
  npm -g     npm install -g --offline --prefix P LAUNCHER.tgz PLATFORM.tgz
  then       `llm-judge --version` of what was installed, once per run (not timed)
Wall time of each install command, from its start to its exit; median, min and max.
uv and pipx come from scripts/package-tools.sh (pinned). Nothing here is a test.
"""

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd, env):
    start = time.monotonic()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    return time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="the folder holding the wheel and the two npm tarballs")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    tools = subprocess.run([os.path.join(ROOT, "scripts/package-tools.sh")], check=True,
                           capture_output=True, text=True).stdout.strip()
    wheel = sorted(glob.glob(os.path.join(args.dir, "llm_judge-*.whl")))[-1]
    launcher = [t for t in glob.glob(os.path.join(args.dir, "llm-judge-llm-judge-[0-9]*.tgz"))][0]
    platform = [t for t in glob.glob(os.path.join(args.dir, "llm-judge-llm-judge-*-*-[0-9]*.tgz"))][0]
    python = sys.executable
    methods = {
        "venv alone": lambda d, env: [[python, "-m", "venv", f"{d}/venv"]],
        "pip": lambda d, env: [[f"{d}/venv/bin/python", "-m", "pip", "install", "--no-index",
                                "--disable-pip-version-check", wheel]],
        "uv tool": lambda d, env: [[f"{tools}/uv", "tool", "install", "--offline", "--python", python, wheel]],
        "pipx": lambda d, env: [[f"{tools}/pipx", "install", "--python", python, "--pip-args=--no-index", wheel]],
        "npm -g": lambda d, env: [["npm", "install", "-g", "--offline", "--no-audit", "--no-fund",
                                   "--no-update-notifier", "--cache", f"{d}/npm-cache", "--prefix", f"{d}/npm",
                                   launcher, platform]],
    }
    installed = {"pip": "venv/bin/llm-judge", "uv tool": "uv/bin/llm-judge",
                 "pipx": "pipx/bin/llm-judge", "npm -g": "npm/bin/llm-judge"}
    print(f"wheel {os.path.basename(wheel)} {os.path.getsize(wheel) / 1e6:.2f} MB; npm "
          f"{os.path.basename(platform)} {os.path.getsize(platform) / 1e6:.2f} MB + "
          f"{os.path.basename(launcher)} {os.path.getsize(launcher) / 1e3:.1f} kB")
    times = {m: [] for m in methods}
    for _ in range(args.runs):
        for name, steps in methods.items():
            d = tempfile.mkdtemp(prefix="llm-judge-install-")
            env = dict(os.environ, HOME=f"{d}/home", UV_CACHE_DIR=f"{d}/uv/cache",
                       UV_TOOL_DIR=f"{d}/uv/tools", UV_TOOL_BIN_DIR=f"{d}/uv/bin",
                       UV_PYTHON_DOWNLOADS="never", UV_NO_CONFIG="1", PIPX_HOME=f"{d}/pipx",
                       PIPX_BIN_DIR=f"{d}/pipx/bin", PIPX_MAN_DIR=f"{d}/pipx/man")
            os.makedirs(env["HOME"])
            if name == "pip":
                subprocess.run([python, "-m", "venv", f"{d}/venv"], check=True, timeout=300)
            try:
                times[name].append(sum(timed(cmd, env) for cmd in steps(d, env)))
                if name in installed:
                    out = subprocess.run([f"{d}/{installed[name]}", "--version"], env=env, check=True,
                                         capture_output=True, text=True, timeout=60).stdout.strip()
                    assert out.startswith("llm-judge "), out
            finally:
                shutil.rmtree(d, ignore_errors=True)
    for name, t in times.items():
        print(f"{name:<11} median {statistics.median(t):.3f} s  (min {min(t):.3f}, max {max(t):.3f}, "
              f"{len(t)} runs)")


if __name__ == "__main__":
    main()
