# One-off script of run d (bench/results/HISTORY.md), kept as the record of how its figures
# were taken: a backlog of N jobs, fsync on or off, plain, under strace -c or under perf
# record: jobs/s and the daemon's and its reaped children's CPU per job. It imports
# bench/run.py from this checkout (whose helpers may have changed since run d); /mnt/benchfs
# is that session's journaled ext4 (docs/performance.md says how to make one).
import os, sys, time, subprocess, json
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import run
run.STATE_ROOT = "/mnt/benchfs"
n = int(sys.argv[1]); fsync = sys.argv[2] == "on"; mode = sys.argv[3]  # plain|strace|perf
w = run.World(config=f"fsync = {'true' if fsync else 'false'}")
try:
    w.write_jobs(n)
    t0 = time.monotonic()
    pid = w.start(2)
    tracer = None
    if mode == "strace":
        tracer = subprocess.Popen(["strace", "-f", "-c", "-o", "/tmp/prof/strace.txt", "-p", str(pid)])
    elif mode == "perf":
        tracer = subprocess.Popen(["perf", "record", "-F", "4000", "--call-graph", "dwarf,16384", "-p", str(pid), "-o", "/tmp/prof/perf.data"], stderr=subprocess.DEVNULL)
    run.wait_for_count(w.verdicts, n, 3600, "v")
    dt = time.monotonic() - t0
    ticks = run.cpu_ticks(pid)
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cticks = int(fields[13]) + int(fields[14])
    print(f"{n/dt:.0f} jobs/s; daemon {ticks/run.CLK_TCK*1000/n:.3f} ms CPU/job; reaped children {cticks/run.CLK_TCK*1000/n:.3f}")
    if tracer:
        tracer.send_signal(2); tracer.wait(60)
finally:
    w.close()
