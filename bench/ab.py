#!/usr/bin/env python3
"""A/B of two (or more) llm-judge binaries on the backlog workload, interleaved so a noisy
machine hurts all alike: each round runs the floor, then A and B (order alternating;
with a third binary C and more, the order rotates),
with fsync off and on (or one of them, `--fsync`). Reports, per binary, the median throughput as a ratio of the floor
measured in the same round, the CPU the judge spent per job (the daemon and its
long-lived helpers, the supervisor zygote and pooled supervisors: utime + stime from
/proc; a supervisor forked per attempt is not counted), and the whole machine's CPU per
job (/proc/stat, runners and short-lived supervisors included: the fair comparison).
Then the paired differences, B minus A round by round, with 95 % confidence intervals:
on this 2-vCPU VM an A/A run (one binary against a copy of itself) gave, over 10 rounds
of 3,000 jobs, ±0.014 of the ratio, ±6 µs of judge CPU and ±19 µs of machine CPU per
job; over 10 rounds of 1,500 jobs the two medians came out 0.03 apart.

    python3 bench/ab.py BIN_A BIN_B [BIN_C ...] [--rounds 5] [--jobs 1000] [--workers 2] [--fsync off|on|both]
    python3 bench/ab.py BIN_A BIN_B --rounds 10 --jobs 3000 --fsync off --latency-jobs 0   # small changes

Build the two binaries first (e.g. `git stash; cargo build --release; cp ...`). Uses
bench/run.py's World and fake runner; asserts nothing.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402


def one(binary, n, workers, fsync):
    run.BIN = binary
    w = run.World(config=f"fsync = {'true' if fsync else 'false'}")
    try:
        w.write_jobs(n)
        c0 = run.busy_ticks()
        t0 = time.monotonic()
        pid = w.start(workers)
        run.wait_for_count(w.verdicts, n, 3600, "backlog")
        rate = n / (time.monotonic() - t0)
        machine = run.busy_ticks() - c0
        run.wait_until(lambda: run.count(w.jobs) == 0, 60, "backlog jobs removed")
        ticks = run.cpu_ticks(pid) + sum(run.cpu_ticks(h) for h in run.helpers_of(pid))
        per_job = lambda t: t / run.CLK_TCK * 1000 / n
        return rate, per_job(ticks), per_job(machine)
    finally:
        w.close()


# Two-sided 95 % points of Student's t, by degrees of freedom (1 to 30).
T95 = [12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13,
       2.12, 2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04]


def paired(a_rows, b_rows, fsync, label="B"):
    """B minus A, round by round (each pair shares its round's machine): the mean
    difference of the floor ratio, the judge's CPU and the machine's CPU per job, with
    95 % confidence intervals. The judge's CPU has the fewest sources of noise and
    resolves the smallest changes. An interval that spans 0 means this many rounds
    cannot tell A from B."""
    n = len(a_rows)
    if n < 2:
        return f"paired fsync {'on ' if fsync else 'off'}: too few rounds for an interval"

    def interval(k):
        d = [b[k] - a[k] for a, b in zip(a_rows, b_rows)]
        half = T95[min(n - 1, 30) - 1] * statistics.stdev(d) / n ** 0.5
        return statistics.mean(d), half, sum(x > 0 for x in d)

    r, r_half, higher = interval(0)
    j, j_half, _ = interval(1)
    m, m_half, _ = interval(2)
    return (f"paired fsync {'on ' if fsync else 'off'} ({label} - A, {n} rounds): ratio {r:+.3f} ± {r_half:.3f} "
            f"({label} higher in {higher}), judge CPU {j * 1000:+.0f} ± {j_half * 1000:.0f} µs/job, "
            f"machine CPU {m * 1000:+.0f} ± {m_half * 1000:.0f} µs/job")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("more", nargs="*", help="C, D, ...: each compared with A too")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--latency-jobs", type=int, default=100, help="per latency run (0: none)")
    p.add_argument("--fsync", choices=["off", "on", "both"], default="both")
    p.add_argument("--state-root", help="make the state folders here (as bench/run.py)")
    args = p.parse_args()
    run.STATE_ROOT = args.state_root
    run.build()
    modes = {"off": (False,), "on": (True,), "both": (False, True)}[args.fsync]
    binaries = list(zip("ABCDEFGH", [args.a, args.b] + args.more))
    results = {(label, fsync): [] for label, _ in binaries for fsync in (False, True)}
    latencies = {(label, fsync): [] for label, _ in binaries for fsync in (False, True)}
    for r in range(args.rounds):
        floor = run.floor_jobs_per_second(args.jobs, args.workers)
        # Two binaries alternate; more rotate, so each runs first, second, ... in turn.
        if len(binaries) == 2:
            order = binaries if r % 2 == 0 else binaries[::-1]
        else:
            shift = r % len(binaries)
            order = binaries[shift:] + binaries[:shift]
        for fsync in modes:
            for label, binary in order:
                rate, cpu_ms, machine_ms = one(binary, args.jobs, args.workers, fsync)
                results[(label, fsync)].append((rate / floor, cpu_ms, machine_ms, args.jobs / rate))
        for fsync in modes:
            for label, binary in order:
                if args.latency_jobs:
                    run.BIN = binary
                    config = "" if fsync else "fsync = false"
                    latencies[(label, fsync)].append(run.latency(args.latency_jobs, 0.1, config))
        ratios = "; ".join(f"fsync {'on' if f else 'off'} "
                           + " ".join(f"{label} {results[(label, f)][-1][0]:.3f}" for label, _ in binaries)
                           for f in modes)
        print(f"round {r + 1}/{args.rounds}: floor {floor:.0f}/s; {ratios}", flush=True)
    for fsync in modes:
        for label, binary in binaries:
            rows = results[(label, fsync)]
            ratio = statistics.median(x[0] for x in rows)
            cpu = statistics.median(x[1] for x in rows)
            machine = statistics.median(x[2] for x in rows)
            wall = statistics.median(x[3] for x in rows)
            print(f"{label} fsync {'on ' if fsync else 'off'}: {ratio:.3f} of floor ({wall:.2f} s), "
                  f"judge CPU {cpu:.2f} ms/job, machine CPU {machine:.2f} ms/job "
                  f"(median of {len(rows)})  {binary}")
    for fsync in modes:
        for label, _ in binaries[1:]:
            print(paired(results[("A", fsync)], results[(label, fsync)], fsync, label))
    for (label, fsync), runs in latencies.items():
        if not runs:
            continue
        binary = dict(binaries)[label]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{label} latency fsync {'on ' if fsync else 'off'} (median of {len(runs)} runs of {args.latency_jobs} jobs): "
              f"to runner start p50 {med['start_p50_ms']:.1f} p95 {med['start_p95_ms']:.1f} ms; "
              f"to verdict visible p50 {med['visible_p50_ms']:.1f} p95 {med['visible_p95_ms']:.1f} ms  {binary}")


if __name__ == "__main__":
    main()
