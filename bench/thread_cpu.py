#!/usr/bin/env python3
"""User and system CPU per job, by thread kind, from /proc ticks: the daemon's slot
threads and its other threads, its pooled supervisors and zygote; or, with `spec`, the C
program doing the contract's per-job work (bench/design_floor.c): its worker processes and
their pooled supervisors. Shows where the judge's CPU goes beyond that program's, split
into user and system time (perf's sampling cannot split the kernel's share reliably on a
VM without a PMU).

    python3 bench/thread_cpu.py BINARY|spec [--jobs 4000] [--state-root DIR]

Both run a backlog: the jobs are written before they start. The daemon's threads and
helper processes are read once its last verdict is out, before it is stopped (its
start-up, a few ms, is counted too). Each of the C program's worker processes and
pooled supervisors reports its own getrusage as it ends (DESIGN_FLOOR_RUSAGE). Workers
2, fsync off. Ticks are 10 ms: use a few thousand jobs. Asserts nothing.
"""

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402

TCK = os.sysconf("SC_CLK_TCK")


def per_job(label, user_s, system_s, n):
    print(f"  {label}: user {user_s / n * 1e6:.0f} µs/job, system {system_s / n * 1e6:.0f} µs/job")


def ticks(stats):
    """(user, system) seconds of a set of /proc stats."""
    return sum(s[2] for s in stats) / TCK, sum(s[3] for s in stats) / TCK


def daemon(binary, n):
    run.BIN = os.path.abspath(binary)
    w = run.World(config="fsync = false")
    try:
        w.write_jobs(n)
        pid = w.start(2)
        run.wait_for_count(w.verdicts, n, 600, "backlog")
        threads = [s for t in os.listdir(f"/proc/{pid}/task") if (s := run.proc_stat(f"/proc/{pid}/task/{t}/stat"))]
        helpers = [s for h in run.helpers_of(pid) if (s := run.proc_stat(f"/proc/{h}/stat"))]
    finally:
        w.close()
    slot = [s for s in threads if s[0].startswith("llm-judge-slot")]
    other = [s for s in threads if not s[0].startswith("llm-judge-slot")]
    for label, stats in (("slot threads", slot), ("other daemon threads", other), ("supervisors and zygote", helpers)):
        per_job(label, *ticks(stats), n)


def spec(n):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "rusage")
        os.environ["DESIGN_FLOOR_RUSAGE"] = report
        try:
            rate = run.design_floor("spec", n, 2, False)
        finally:
            del os.environ["DESIGN_FLOOR_RUSAGE"]
        totals = {}
        with open(report) as f:
            for kind, user_us, system_us in (line.split() for line in f):
                u, y, count = totals.get(kind, (0, 0, 0))
                totals[kind] = (u + int(user_us), y + int(system_us), count + 1)
    for kind, label in (("worker", "worker processes"), ("supervisor", "pooled supervisors")):
        u, y, count = totals.get(kind, (0, 0, 0))
        per_job(f"{label} ({count})", u / 1e6, y / 1e6, n)
    print(f"  ({rate:.0f} jobs/s)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", help="a daemon binary, or spec")
    p.add_argument("--jobs", type=int, default=4000)
    p.add_argument("--state-root", help="make the state folders here (as bench/run.py)")
    args = p.parse_args()
    run.STATE_ROOT = args.state_root
    print(f"{args.what}, {args.jobs} jobs, workers 2, fsync off:")
    run.build()
    if args.what == "spec":
        spec(args.jobs)
    else:
        daemon(args.what, args.jobs)

if __name__ == "__main__":
    main()
