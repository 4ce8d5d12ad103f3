#!/usr/bin/env python3
"""A hook's notice stop, binary A against binary B, paired (issue 55's A/B).

    python3 bench/hook_ab.py OLD_BIN NEW_BIN --calls 300 --out bench/results/X.txt

One daemon (of NEW_BIN, an `anthropic` API runner against a stand-in on 127.0.0.1, as
bench/hooks.py's `notice` variant) holds the state folder; each round runs
`llm-judge hook claude` with a claude 2.1.328 Stop stdin and one notice rule, once with
A and once with B (the order alternating), each on a fresh session, timed from spawn to
exit as Claude Code waits for it. Reported: each binary's median and p95, and the paired
difference B - A (median, with a 95 % bootstrap interval of the median). Standard
library only; nothing here is a test.
"""

import argparse
import os
import platform
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import api_runner  # noqa: E402
import hooks  # noqa: E402
import prestart  # noqa: E402


def interval(diffs, rounds=2000, seed=7):
    """The median of `diffs` and its 95 % bootstrap interval."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(rounds))
    return statistics.median(diffs), meds[int(0.025 * rounds)], meds[int(0.975 * rounds)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--out")
    args = ap.parse_args()
    a, b = (os.path.abspath(x) for x in (args.a, args.b))
    api_runner.BIN = prestart.BIN = hooks.BIN = b
    report = []

    def say(line=""):
        print(line, flush=True)
        report.append(line)

    say("bench/hook_ab.py, %s, %d CPUs, %s, load %s" % (
        time.strftime("%Y-%m-%d %H:%M"), os.cpu_count(), platform.release(),
        open("/proc/loadavg").read().split()[:3]))
    say("A %s\nB %s" % (a, b))
    daemon = api_runner.ApiDaemon("notice")
    try:
        daemon.wait_ready()
        target = hooks.Target(daemon, os.path.join(daemon.root, "config.toml"),
                              os.path.join(daemon.root, "home"), "notice")
        times = {a: [], b: []}
        diffs = []
        for n in range(args.calls + 1):
            order = (a, b) if n % 2 == 0 else (b, a)
            took = {}
            for binary in order:
                target.argv[0] = binary
                session = "ab-%d-%s" % (n, "a" if binary == a else "b")
                took[binary], _ = target.call(hooks.stop(session, n))
            if n == 0:
                continue  # warm-up
            for binary in (a, b):
                times[binary].append(took[binary])
            diffs.append(took[b] - took[a])
    finally:
        daemon.stop()
    say("%d rounds after one warm-up, the order alternating" % args.calls)
    say("| binary | median ms | p95 ms |")
    say("|---|---|---|")
    for name, binary in (("A", a), ("B", b)):
        xs = times[binary]
        say("| %s | %.2f | %.2f |" % (name, 1000 * prestart.pct(xs, 0.5), 1000 * prestart.pct(xs, 0.95)))
    med, lo, hi = interval(diffs)
    say("paired B - A: median %+.3f ms, 95 %% interval [%+.3f, %+.3f] ms" % (1000 * med, 1000 * lo, 1000 * hi))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
