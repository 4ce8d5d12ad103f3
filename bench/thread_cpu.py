#!/usr/bin/env python3
"""User and system CPU per job, by thread kind, from /proc ticks: the daemon's slot
threads and its other threads, its pooled supervisors and zygote; or, with `spec`, the C
program doing the SPEC's per-job work (bench/design_floor.c): its worker processes and
their pooled supervisors. Shows where the judge's CPU goes beyond that program's, split
into user and system time (perf's sampling cannot split the kernel's share reliably on a
VM without a PMU).

    python3 bench/thread_cpu.py BINARY|spec [--jobs 4000] [--state-root DIR]

The daemon runs a warm-up batch first, then the measured one (its threads are read before
and after). The C program is sampled every 5 ms while it runs (the last sample before a
process ends is kept, so a few ticks may be missed). Workers 2, fsync off. Ticks are 10 ms:
use a few thousand jobs. Asserts nothing.
"""

import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402

TCK = os.sysconf("SC_CLK_TCK")


def stat_of(path):
    """(name, ppid, utime, stime) from a /proc stat file, or None if it is gone."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return text[text.index("(") + 1:text.rindex(")")], int(fields[1]), int(fields[11]), int(fields[12])


def processes():
    return {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := stat_of(f"/proc/{p}/stat"))}


def per_job(label, ticks_user, ticks_sys, n):
    print(f"  {label}: user {ticks_user / TCK / n * 1e6:.0f} µs/job, system {ticks_sys / TCK / n * 1e6:.0f} µs/job")


def daemon(binary, n):
    run.BIN = os.path.abspath(binary)
    w = run.World(config="fsync = false")
    try:
        pid = w.start(2)
        w.write_jobs(n)
        run.wait_for_count(w.verdicts, n, 600, "warm-up")

        def snapshot():
            threads = {int(t): stat_of(f"/proc/{pid}/task/{t}/stat") for t in os.listdir(f"/proc/{pid}/task")}
            procs = processes()
            helpers, frontier = {}, {pid}
            while frontier:
                frontier = {p for p, s in procs.items() if s[1] in frontier}
                helpers.update({p: procs[p] for p in frontier})
            return threads, helpers

        threads0, helpers0 = snapshot()
        w.write_jobs(n, prefix="k")
        run.wait_for_count(w.verdicts, 2 * n, 600, "measured batch")
        threads1, helpers1 = snapshot()
    finally:
        w.close()
    kinds = {}
    for t, s in threads1.items():
        if s and threads0.get(t):
            kind = "slot threads" if s[0].startswith("llm-judge-slot") else "other daemon threads"
            u, y = kinds.get(kind, (0, 0))
            kinds[kind] = (u + s[2] - threads0[t][2], y + s[3] - threads0[t][3])
    u = sum(s[2] - helpers0[p][2] for p, s in helpers1.items() if p in helpers0)
    y = sum(s[3] - helpers0[p][3] for p, s in helpers1.items() if p in helpers0)
    kinds["supervisors and zygote"] = (u, y)
    for kind, (u, y) in kinds.items():
        per_job(kind, u, y, n)


def spec(n):
    run.build()
    last, done = {}, threading.Event()

    def sample():
        while not done.is_set():
            last.update({p: s for p, s in processes().items() if s[0] == "design-floor"})
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        rate = run.design_floor("spec", n, 2, False)
    finally:
        done.set()
        sampler.join()
    main = {p for p, s in last.items() if s[1] not in last}
    workers = {p for p, s in last.items() if s[1] in main}
    # A runner before its exec also shows as design-floor: the supervisors are the
    # workers' children that lived long enough to have ticks.
    supervisors = {p for p, s in last.items() if s[1] in workers and s[2] + s[3] > 0}
    for label, group in (("worker processes", workers), ("pooled supervisors", supervisors)):
        per_job(label, sum(last[p][2] for p in group), sum(last[p][3] for p in group), n)
    print(f"  ({rate:.0f} jobs/s)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", help="a daemon binary, or spec")
    p.add_argument("--jobs", type=int, default=4000)
    p.add_argument("--state-root", help="make the state folders here (as bench/run.py)")
    args = p.parse_args()
    run.STATE_ROOT = args.state_root
    print(f"{args.what}, {args.jobs} jobs, workers 2, fsync off:")
    if args.what == "spec":
        spec(args.jobs)
    else:
        run.build()
        daemon(args.what, args.jobs)


if __name__ == "__main__":
    main()
