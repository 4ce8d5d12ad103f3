#!/usr/bin/env python3
"""The fsync ceiling: the most jobs per second a filesystem allows when every job makes
the four fsyncs of llm-judge's durable publish (docs/reference.md, "State folder", `fsync = true`), and
nothing else: no runner, no judge.

    python3 bench/fsync_ceiling.py [--root DIR] [--jobs 2000]
    python3 bench/fsync_ceiling.py --latency [--root DIR] [--jobs 300]

Per job, W writer threads (W = 1, 2, 4, 8, 16) each do what the daemon's publish does to
the disk: write the verdict's temp file and fsync it, rewrite the claim record and fsync
it, fsync the claims folder, rename the temp file into place, fsync the verdicts folder,
remove the claim. Python releases its lock during each system call, so the writers'
fsyncs overlap as the daemon's do (the journal may commit several in one go). The
highest rate over W bounds any judge's backlog throughput with fsync on, on this disk:
divide it by the `xargs` floor of bench/run.py to get the largest ratio reachable. The
machine's CPU time per job (all CPUs, journal threads included, from /proc/stat; Python's
own share is a few tens of µs) bounds it from the other side: on a machine whose CPUs the
runners already fill, a job cannot cost less than the floor's runner start plus this.
With `--latency`, one writer makes the publishes one at a time, a few ms apart (as
the latency workload's jobs arrive), and reports each fsync's time and the whole
publish's, p50 and p95: on this disk, the part of "publish to verdict visible" that no
judge with fsync on can avoid (the temp file's fsync, the claim record's and the rename's
folder fsync are in series by the protocol; the claims folder's could move earlier).
It asserts nothing.
"""

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the machine CPU counter and the filesystem's name)


def writer(root, jobs, first):
    for i in range(first, first + jobs):
        timed_publish(root, i)


def timed_publish(root, i):
    """One job's publish: its claim, the verdict's temp file and fsync, the claim's
    "publishing" record and fsync, the claims folder's fsync, the rename and the
    verdicts folder's fsync, the claim removed. Returns the seconds each fsync took,
    and the whole."""
    claims, verdicts = os.path.join(root, "claims"), os.path.join(root, "verdicts")
    claim = os.path.join(claims, f"j{i:07d}.json")
    cfd = os.open(claim, os.O_RDWR | os.O_CREAT, 0o600)
    os.write(cfd, b'{"state": "running"}')
    t = [time.monotonic()]
    temp = os.path.join(verdicts, f".j{i:07d}.json.tmp")
    tfd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(tfd, b'{"hit": false, "outcome": "clear"}\n' * 4)
    os.fsync(tfd)
    t.append(time.monotonic())
    os.close(tfd)
    os.pwrite(cfd, b'{"state": "publishing"}', 0)
    os.fsync(cfd)
    t.append(time.monotonic())
    sync_dir(claims)
    t.append(time.monotonic())
    os.rename(temp, os.path.join(verdicts, f"j{i:07d}.json"))
    sync_dir(verdicts)
    t.append(time.monotonic())
    os.unlink(claim)
    os.close(cfd)
    return [b - a for a, b in zip(t, t[1:])] + [t[-1] - t[0]]


def latency(parent, jobs):
    root = tempfile.mkdtemp(prefix="llm-judge-fsync-", dir=parent)
    try:
        for sub in ("claims", "verdicts"):
            os.mkdir(os.path.join(root, sub), 0o700)
        rows = []
        for i in range(jobs):
            rows.append(timed_publish(root, i))
            time.sleep(0.005)
        names = ["temp file", "claim record", "claims folder", "verdicts folder", "whole publish"]
        for k, name in enumerate(names):
            ms = sorted(r[k] * 1000 for r in rows)
            p = lambda q: ms[min(len(ms) - 1, round(q / 100 * (len(ms) - 1)))]
            print(f"fsync latency  {name:<16} p50 {p(50):.2f} ms  p95 {p(95):.2f} ms", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def sync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rate(parent, jobs, writers):
    root = tempfile.mkdtemp(prefix="llm-judge-fsync-", dir=parent)
    try:
        for sub in ("claims", "verdicts"):
            os.mkdir(os.path.join(root, sub), 0o700)
        per = jobs // writers
        threads = [threading.Thread(target=writer, args=(root, per, w * per)) for w in range(writers)]
        t0, c0 = time.monotonic(), run.busy_ticks()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        n = per * writers
        cpu_ms = (run.busy_ticks() - c0) / os.sysconf("SC_CLK_TCK") * 1000 / n
        return n / (time.monotonic() - t0), cpu_ms
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=None, help="where to write (default: the system temp folder)")
    ap.add_argument("--jobs", type=int, default=None, help="2000, or 300 with --latency")
    ap.add_argument("--latency", action="store_true", help="time one publish at a time")
    args = ap.parse_args()
    fs = run.filesystem_of(args.root or tempfile.gettempdir())
    print(f"fsync ceiling  on {fs}", flush=True)
    if "(no journal)" in fs:
        print("note: an ext4 without a journal slows file creation after many deletions; "
              "--root a journaled filesystem", flush=True)
    if args.latency:
        latency(args.root, args.jobs or 300)
        return
    best = 0.0
    for writers in (1, 2, 4, 8, 16):
        r, cpu_ms = rate(args.root, args.jobs or 2000, writers)
        best = max(best, r)
        print(f"fsync ceiling  {writers:>2} writers  {r:7.0f} jobs/s  machine CPU {cpu_ms:.2f} ms/job", flush=True)
    print(f"fsync ceiling  best {best:.0f} jobs/s (4 fsyncs per job)", flush=True)


if __name__ == "__main__":
    main()
