#!/usr/bin/env python3
"""System calls per job of the daemon on a backlog, by name, from `strace -f` (issue 42).

    python3 strace_count.py BIN [JOBS] [STATE_ROOT]     # e.g. BIN 300 /mnt/benchfs

strace attaches once the daemon has started, so the per-job figure divides by the
verdicts renamed while it watched. Needs strace. Asserts nothing.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import run  # noqa: E402

binary = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
run.STATE_ROOT = sys.argv[3] if len(sys.argv) > 3 else None
run.BIN = os.path.abspath(binary)
fd, out = tempfile.mkstemp(prefix="strace-")
os.close(fd)
w = run.World(config="fsync = true")
try:
    w.write_jobs(n)
    pid = w.start(2)
    st = subprocess.Popen(["strace", "-f", "-qq", "-o", out, "-p", str(pid)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    run.wait_for_count(w.verdicts, n, 600, "backlog")
    st.send_signal(2)
    st.wait()
finally:
    w.close()
calls, jobs = collections.Counter(), 0
with open(out) as f:
    for line in f:
        m = re.match(r"\d+\s+(\w+)\(", line)
        if m:
            calls[m.group(1)] += 1
            jobs += m.group(1) == "rename" and "verdicts" in line
os.unlink(out)
jobs = max(jobs, 1)
print(f"{binary}: {jobs} jobs seen, {sum(calls.values()) / jobs:.1f} system calls per job")
for name, count in calls.most_common():
    print(f"  {name:20} {count / jobs:6.2f}")
