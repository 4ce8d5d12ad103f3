# One-off script of run d (bench/results/HISTORY.md), kept as the record of how its figures
# were taken: the C floor with the queue files against xargs, N times in a row with an
# optional pause (how the ratio drifts from minute to minute). It imports bench/run.py from
# this checkout (whose helpers may have changed since run d); /mnt/benchfs is that session's
# journaled ext4 (docs/performance.md says how to make one).
import os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import run
for i in range(int(sys.argv[1])):
    t=time.monotonic()
    r=run.design_floor("files", 1000, 2, False)
    x=run.floor_jobs_per_second(1000, 2)
    print(f"{time.strftime('%H:%M:%S')} files off {r:6.0f}/s  xargs {x:6.0f}/s  ratio {r/x:.2f}", flush=True)
    if len(sys.argv)>2: time.sleep(float(sys.argv[2]))
