#!/usr/bin/env python3
"""What making a job durable costs a hook (issue 50): the wall time of one
`llm-judge enqueue` (no --wait, no daemon) with `fsync = true` (the job file and its
folder fsynced before it returns: the default) and with `fsync = false`, interleaved
run by run on one state folder on the disk under --dir, so a noisy machine hurts both
alike. Reports the median and p95 of each, and their ratio.

    cargo build --release
    python3 bench/enqueue_sync.py                       # target/release/llm-judge, 300 runs each
    python3 bench/enqueue_sync.py --bin BIN --runs 500 --dir /var/tmp

Each run starts a fresh process (as a hook does). Nothing here is a test.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def p95(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(REPO, "target", "release", "llm-judge"))
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--dir", default=None, help="where the state folders go (a real disk)")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="llm-judge-enqueue-sync-", dir=args.dir)
    try:
        times = {True: [], False: []}
        configs = {}
        for fsync in (True, False):
            folder = os.path.join(root, "on" if fsync else "off")
            os.makedirs(folder)
            config = os.path.join(folder, "config.toml")
            with open(config, "w") as f:
                f.write(f"fsync = {'true' if fsync else 'false'}\n")
            configs[fsync] = (config, os.path.join(folder, "state"))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_JUDGE", "CATSTACK"))}
        env["HOME"] = root
        env["XDG_CONFIG_HOME"] = os.path.join(root, "xdg")
        for i in range(args.runs * 2 + 2):
            fsync = (i % 2 == 0) != (i // 2 % 2 == 0)
            config, state = configs[fsync]
            argv = [args.bin, "--config", config, "--state-dir", state, "-q", "enqueue",
                    "--id", f"j{i}", "--transcript", "t", "--prompt", "Is this reply fine?"]
            start = time.perf_counter()
            done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
            elapsed = (time.perf_counter() - start) * 1000
            if done.returncode != 0:
                raise SystemExit(f"enqueue failed: {done.stderr.decode(errors='replace')}")
            if i >= 2:  # the first of each creates the state folder
                times[fsync].append(elapsed)
        on, off = times[True], times[False]
        print(f"enqueue, {args.runs} runs each, state folders under {root}")
        print(f"  fsync = true : median {statistics.median(on):.2f} ms, p95 {p95(on):.2f} ms")
        print(f"  fsync = false: median {statistics.median(off):.2f} ms, p95 {p95(off):.2f} ms")
        print(f"  ratio true/false: median {statistics.median(on) / statistics.median(off):.2f}, "
              f"p95 {p95(on) / p95(off):.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
