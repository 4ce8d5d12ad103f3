#!/usr/bin/env python3
"""Scheduler events per job: wake-ups, sleeps, preemptions and migrations, by command
name, over a backlog run of one daemon binary or of a C design floor. Shows which
thread or process a job wakes (perf's sched tracepoints, the whole machine).

Also, per job, the CPU time of each command name (time on a CPU between context
switches; a runner's time before its exec, still under its parent's name, counted
apart), and how long a new runner waits for a CPU after its fork.

And the slot gap: from a runner's exit to the next runner its supervisor forks, split
at the moment the supervisor goes idle (its sweep and report done, waiting for the next
request). A slot's cycle is the gap plus the runner's life; with few workers and
spare CPU the gap sets the throughput.

    python3 bench/sched_counts.py BINARY|pooled|spec [--jobs 3000] [--workers 2] [--state-root DIR]

`pooled` and `spec` are bench/design_floor.c's levels. Needs `perf` and root
(tracepoints). Uses bench/run.py's World, fake runner and design floor; fsync off.
Pooled supervisors show under the binary's file name.
"""

import argparse
import bisect
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402

EVENTS = ["sched:sched_switch", "sched:sched_wakeup", "sched:sched_migrate_task",
          "sched:sched_process_fork", "sched:sched_process_exec", "sched:sched_process_exit"]
RUNNER_NAME = os.path.basename(run.RUNNER)


def record(what, jobs, workers, data):
    """Runs the backlog under `perf record`; returns jobs per second."""
    cmd = ["perf", "record", "-a", "-o", data] + sum((["-e", e] for e in EVENTS), [])
    perf = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # perf's start, outside the timed part
    try:
        if what in ("pooled", "spec"):
            return run.design_floor(what, jobs, workers, False)
        run.BIN = os.path.abspath(what)
        return run.backlog(jobs, workers, False)
    finally:
        perf.send_signal(2)
        perf.wait()


def count(data):
    """Per-kind counters by command name, CPU seconds by command name, new runners'
    waits for a CPU (seconds), and the slot gaps (seconds, split in two)."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "tid,time,event,trace"],
                         capture_output=True, text=True, check=True).stdout
    kinds = {k: collections.Counter() for k in ("wake-ups", "sleeps", "preempted", "migrations")}
    name = lambda c: re.sub(r"/\d+$", "", c)  # noqa: E731 (kernel threads per CPU)
    parent, forks, exits, idles = {}, collections.defaultdict(list), collections.defaultdict(list), collections.defaultdict(list)
    on_cpu, cpu, runners = {}, collections.Counter(), set()
    forked_at, waits = {}, {}
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)", line)
        if not m:
            continue
        tid, t, event, trace = int(m.group(1)), float(m.group(2)), m.group(3), m.group(4)
        if event == "sched:sched_wakeup":
            kinds["wake-ups"][name(re.search(r"comm=(.+?) pid=", trace).group(1))] += 1
        elif event == "sched:sched_switch":
            m = re.search(r"prev_comm=(.+?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> "
                          r"next_comm=(.+?) next_pid=(\d+)", trace)
            prev, nxt = int(m.group(2)), int(m.group(5))
            # perf prints a preempted task as R, or R+ when a wake-up preempted it.
            runnable = m.group(3).startswith("R")
            kinds["preempted" if runnable else "sleeps"][name(m.group(1))] += 1
            if not runnable:
                idles[prev].append(t)
            if prev in on_cpu:
                since, comm = on_cpu.pop(prev)
                cpu[(comm, prev)] += t - since
            if nxt:
                on_cpu[nxt] = (t, name(m.group(4)))
                if nxt in forked_at:
                    waits[nxt] = t - forked_at.pop(nxt)
        elif event == "sched:sched_migrate_task":
            kinds["migrations"][name(re.search(r"comm=(.+?) pid=", trace).group(1))] += 1
        elif event == "sched:sched_process_fork":
            child = int(re.search(r"child_pid=(\d+)", trace).group(1))
            parent[child] = tid
            forks[tid].append(t)
            forked_at[child] = t
        elif event == "sched:sched_process_exec" and RUNNER_NAME in trace:
            runners.add(tid)
            if tid in on_cpu:
                # Its time so far ran under the parent's name.
                since, comm = on_cpu[tid]
                cpu[(comm, tid)] += t - since
                on_cpu[tid] = (t, RUNNER_NAME)
        elif event == "sched:sched_process_exit" and f"comm={RUNNER_NAME}" in trace:
            pid = int(re.search(r" pid=(\d+)", trace).group(1))
            if pid in parent:
                exits[parent[pid]].append(t)
    by_name = collections.Counter()
    for (comm, tid), seconds in cpu.items():
        before_exec = tid in runners and comm != RUNNER_NAME
        by_name[f"{RUNNER_NAME} before its exec" if before_exec else comm] += seconds
    runner_waits = [w for child, w in waits.items() if child in runners]
    return kinds, by_name, runner_waits, slot_gaps(forks, exits, idles), sum(len(e) for e in exits.values())


def slot_gaps(forks, exits, idles):
    """For each runner exit: (until its supervisor goes idle, from then to its next fork)."""
    gaps = []
    for sup, ends in exits.items():
        starts, sleeps = sorted(forks[sup]), sorted(idles[sup])
        for end in ends:
            nxt = bisect.bisect_right(starts, end)
            if nxt == len(starts):
                continue
            start = starts[nxt]
            # The supervisor's last sleep before that fork: waiting for the request.
            i = bisect.bisect_left(sleeps, start) - 1
            if i >= 0 and sleeps[i] > end:
                gaps.append((sleeps[i] - end, start - sleeps[i]))
    return gaps


def quantiles(xs):
    xs = sorted(xs)
    return f"mean {statistics.mean(xs) * 1e6:4.0f} us, p50 {xs[len(xs) // 2] * 1e6:4.0f}, p90 {xs[len(xs) * 9 // 10] * 1e6:4.0f}"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", help="a llm-judge binary, or `pooled` or `spec` for a C design floor")
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
        kinds, by_name, waits, gaps, ends = count(data)
    print(f"{a.what}: {rate:.0f} jobs/s, {a.jobs} jobs, workers {a.workers}, per job:")
    for kind, c in kinds.items():
        top = ", ".join(f"{k} {v / a.jobs:.2f}" for k, v in c.most_common(5))
        print(f"  {kind:10} {sum(c.values()) / a.jobs:5.2f}  ({top})")
    busy = {k: v for k, v in by_name.items() if not k.startswith("swapper")}
    top = ", ".join(f"{k} {v / a.jobs * 1e6:.0f}" for k, v in sorted(busy.items(), key=lambda kv: -kv[1])[:7])
    print(f"  CPU us   {sum(busy.values()) / a.jobs * 1e6:5.0f}  ({top})")
    if waits:
        print(f"a new runner's wait for a CPU, fork to first run: {quantiles(waits)}")
    if gaps:
        print(f"slot gap, a runner's exit to its supervisor's next fork ({len(gaps)} of {ends} exits; "
              "the rest had no idle moment: the next request was already there):")
        print(f"  total                                       {quantiles([a + b for a, b in gaps])}")
        print(f"  until the supervisor is idle (sweep, report) {quantiles([a for a, _ in gaps])}")
        print(f"  from then to the next fork (the judge's turn) {quantiles([b for _, b in gaps])}")


if __name__ == "__main__":
    main()
