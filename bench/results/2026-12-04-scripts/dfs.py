# One-off script of run d (docs/performance.md), kept as the record of how its figures were taken.
# Paths are this session's (/work/main, /mnt/benchfs); run from anywhere with python3.
import sys, os, subprocess
sys.path.insert(0, "/work/main/bench")
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
