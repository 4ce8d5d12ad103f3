#!/usr/bin/env python3
"""Scheduler events per job: wake-ups, sleeps, preemptions and migrations, by command
name, over a backlog run of one daemon binary or of the pooled design floor. Shows
which thread or process a job wakes (perf's sched tracepoints, the whole machine).

    python3 bench/sched_counts.py BINARY|pooled [--jobs 3000] [--workers 2] [--state-root DIR]

Needs `perf` and root (tracepoints). Uses bench/run.py's World, fake runner and design
floor; fsync off. Pooled supervisors show under the binary's file name.
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402

EVENTS = ["sched:sched_switch", "sched:sched_wakeup", "sched:sched_migrate_task"]


def record(what, jobs, workers, data):
    """Runs the backlog under `perf record`; returns jobs per second."""
    cmd = ["perf", "record", "-a", "-o", data] + sum((["-e", e] for e in EVENTS), [])
    perf = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # perf's start, outside the timed part
    try:
        if what == "pooled":
            return run.design_floor("pooled", jobs, workers, False)
        run.BIN = os.path.abspath(what)
        w = run.World(config="fsync = false")
        try:
            w.write_jobs(jobs)
            t0 = time.monotonic()
            w.start(workers)
            run.wait_for_count(w.verdicts, jobs, 3600, "backlog")
            return jobs / (time.monotonic() - t0)
        finally:
            w.stop()
            w.close()
    finally:
        perf.send_signal(2)
        perf.wait()


def count(data):
    out = subprocess.run(["perf", "script", "-i", data, "-F", "event,trace"],
                         capture_output=True, text=True, check=True).stdout
    kinds = {k: collections.Counter() for k in ("wake-ups", "sleeps", "preempted", "migrations")}
    name = lambda c: re.sub(r"/\d+$", "", c)  # noqa: E731 (kernel threads per CPU)
    for line in out.splitlines():
        if "sched_wakeup:" in line:
            kinds["wake-ups"][name(re.search(r"comm=(.+?) pid=", line).group(1))] += 1
        elif "sched_switch:" in line:
            m = re.search(r"prev_comm=(.+?) prev_pid=\d+ prev_prio=\d+ prev_state=(\S+)", line)
            kinds["sleeps" if m.group(2) != "R" else "preempted"][name(m.group(1))] += 1
        elif "sched_migrate_task:" in line:
            kinds["migrations"][name(re.search(r"comm=(.+?) pid=", line).group(1))] += 1
    return kinds


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", help="a llm-judge binary, or `pooled` for the C design floor")
    p.add_argument("--jobs", type=int, default=3000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--state-root", help="make the state folders here (as bench/run.py)")
    a = p.parse_args()
    if a.state_root:
        run.STATE_ROOT = a.state_root
    run.build()
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        rate = record(a.what, a.jobs, a.workers, data)
        kinds = count(data)
    print(f"{a.what}: {rate:.0f} jobs/s, {a.jobs} jobs, workers {a.workers}, per job:")
    for kind, c in kinds.items():
        top = ", ".join(f"{k} {v / a.jobs:.2f}" for k, v in c.most_common(5))
        print(f"  {kind:10} {sum(c.values()) / a.jobs:5.2f}  ({top})")


if __name__ == "__main__":
    main()
