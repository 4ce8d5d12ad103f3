# One-off script of run d (bench/results/HISTORY.md), kept as the record of how its figures
# were taken: strace -c of bench/design_floor.c at one level over 300 jobs (the C floor's
# system calls per job). It imports bench/run.py from this checkout (whose helpers may have
# changed since run d); /mnt/benchfs is that session's journaled ext4 (docs/performance.md
# says how to make one).
import sys, os, subprocess
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import run
run.STATE_ROOT = "/mnt/benchfs"
w = run.World()
try:
    n = 300
    w.write_jobs(n)
    for sub in ("claims", "verdicts"):
        os.makedirs(os.path.join(w.state, sub), mode=0o700)
    os.symlink(w.runtime, os.path.join(w.state, "tmp"))
    subprocess.run(["strace", "-f", "-c", "-o", "/tmp/prof/dfs.txt", run.DESIGN_FLOOR, sys.argv[1], w.state, str(n), "2", "0", run.RUNNER], stdout=subprocess.DEVNULL, check=True)
finally:
    w.close()
