#!/usr/bin/env python3
"""Instructions per job, by function, with valgrind's callgrind: a count of the
instructions the judge runs in user space, repeatable whatever else the machine does
(the kernel's share is not in it: compare system CPU with bench/ab.py or
bench/thread_cpu.py).

The daemon runs under callgrind through two backlogs of the fake runner (bench/run.py's
World: fresh state folder, runner folders on a tmpfs, cache off, workers 2), a small
and a large one; the per-job figures are the difference of the two divided by the
difference of their sizes, so start-up and shutdown cancel out. callgrind follows the
daemon's forks (the zygote and its pooled supervisors) into files of their own; the
runners are exec'd and run natively, uncounted.

    python3 bench/callgrind.py BIN [--jobs 100 400] [--fsync on|off] [--out DIR] [--top 40]

Prints the instructions per job of the daemon and of its helpers, then the daemon's
functions by inclusive and self count per job (with `--against OTHER_DIR`, a second
binary's output directory: a diff). Needs valgrind. Asserts nothing.
"""

import argparse
import collections
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402


def profile(binary, n, fsync, out_dir):
    """Runs `n` jobs through the daemon under callgrind; its output files' folder."""
    os.makedirs(out_dir, exist_ok=True)
    for old in glob.glob(os.path.join(out_dir, "callgrind.out.*")):
        os.remove(old)
    w = run.World(config=f"fsync = {'true' if fsync else 'false'}")
    try:
        w.write_jobs(n)
        cmd = ["valgrind", "--tool=callgrind", "--quiet",
               f"--callgrind-out-file={out_dir}/callgrind.out.%p",
               binary, "--state-dir", w.state, "--config", w.config, "daemon", "--workers", "2"]
        w.daemon = subprocess.Popen(cmd, env=w.env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run.wait_for_count(w.verdicts, n, 3600, "callgrind backlog")
        run.wait_until(lambda: run.count(w.jobs) == 0, 600, "callgrind jobs removed")
    finally:
        w.close()
    return out_dir


def profile_files(out_dir):
    """{pid: path} of one profile's files, but pid 1's: a supervisor that is the init of
    its own PID namespace sees itself as pid 1, so every such supervisor (and the
    daemon's isolation probe) writes that one file over the others. Only supervisors
    forked without a namespace (older binaries) are counted among the helpers."""
    files = {int(p.rsplit(".", 1)[1]): p for p in glob.glob(os.path.join(out_dir, "callgrind.out.*"))}
    files.pop(1, None)
    return files


def totals(out_dir):
    """{pid: (command kind, total instructions)} of one profile's files."""
    out = {}
    for pid, path in profile_files(out_dir).items():
        total, kind = 0, "?"
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("summary:") or line.startswith("totals:"):
                    total = int(line.split()[1])
                elif line.startswith("cmd:"):
                    kind = line.split(None, 1)[1].strip()
        out[pid] = (kind, total)
    return out


def functions(out_dir, inclusive):
    """Instructions by function in the daemon's own file (the lowest pid: it starts
    first), self or inclusive."""
    counts = collections.Counter()
    files = profile_files(out_dir)
    for path in [files[min(files)]]:
        args = ["callgrind_annotate", "--threshold=100", "--auto=no"]
        if inclusive:
            args.append("--inclusive=yes")
        text = subprocess.run(args + [path], capture_output=True, text=True, check=True).stdout
        for line in text.splitlines():
            m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
            if not m or ":" not in m.group(2):
                continue
            name = m.group(2).split(":", 1)[1].split(" [")[0].strip()
            counts[name] += int(m.group(1).replace(",", ""))
    return counts


def per_job(small, large, n_small, n_large):
    """The difference of two Counters per job of the difference."""
    keys = set(small) | set(large)
    return {k: (large.get(k, 0) - small.get(k, 0)) / (n_large - n_small) for k in keys}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("binary")
    p.add_argument("--jobs", type=int, nargs=2, default=[100, 400])
    p.add_argument("--fsync", choices=["on", "off"], default="on")
    p.add_argument("--out", default=None, help="keep the callgrind files here (default: a temp folder)")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--against", help="another run's --out folder: print the difference, this minus that")
    args = p.parse_args()
    binary = os.path.abspath(args.binary)
    base = args.out or os.path.join(run.ROOT, "target", "callgrind", os.path.basename(binary))
    n_small, n_large = args.jobs
    small_dir = profile(binary, n_small, args.fsync == "on", os.path.join(base, f"n{n_small}"))
    large_dir = profile(binary, n_large, args.fsync == "on", os.path.join(base, f"n{n_large}"))
    report(base, n_small, n_large, args.top, args.against)


def report(base, n_small, n_large, top, against=None):
    small_dir, large_dir = os.path.join(base, f"n{n_small}"), os.path.join(base, f"n{n_large}")
    by_kind = {}
    for label, d in (("small", small_dir), ("large", large_dir)):
        t = totals(d)
        daemon_pid = min(t)  # the daemon is started first: the lowest pid of its run
        by_kind[label] = (t[daemon_pid][1], sum(v[1] for k, v in t.items() if k != daemon_pid), len(t) - 1)
    d_daemon = (by_kind["large"][0] - by_kind["small"][0]) / (n_large - n_small)
    d_helpers = (by_kind["large"][1] - by_kind["small"][1]) / (n_large - n_small)
    print(f"{base}: instructions per job (difference of {n_large} and {n_small} jobs): "
          f"daemon {d_daemon:,.0f}, zygote and supervisors {d_helpers:,.0f} "
          f"({by_kind['large'][2]} helper processes), total {d_daemon + d_helpers:,.0f}")
    for inclusive in (True, False):
        pj = per_job(functions(small_dir, inclusive), functions(large_dir, inclusive), n_small, n_large)
        if against:
            other = per_job(functions(os.path.join(against, f"n{n_small}"), inclusive),
                            functions(os.path.join(against, f"n{n_large}"), inclusive), n_small, n_large)
            keys = set(pj) | set(other)
            rows = sorted(((pj.get(k, 0) - other.get(k, 0), pj.get(k, 0), other.get(k, 0), k) for k in keys),
                          key=lambda r: -abs(r[0]))[:top]
            print(f"\n{'inclusive' if inclusive else 'self'} instructions per job, this minus {against}:")
            for diff, mine, theirs, name in rows:
                print(f"  {diff:+12,.0f}  {mine:12,.0f} {theirs:12,.0f}  {name[:150]}")
        else:
            rows = sorted(pj.items(), key=lambda kv: -kv[1])[:top]
            print(f"\n{'inclusive' if inclusive else 'self'} instructions per job:")
            for name, v in rows:
                print(f"  {v:12,.0f}  {name[:150]}")


if __name__ == "__main__":
    main()
