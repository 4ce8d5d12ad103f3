# One-off script of run d (docs/performance.md), kept as the record of how its figures were taken.
# Paths are this session's (/work/main, /mnt/benchfs); run from anywhere with python3.
import sys, time
sys.path.insert(0, "/work/main/bench")
import run
for i in range(int(sys.argv[1])):
    t=time.monotonic()
    r=run.design_floor("files", 1000, 2, False)
    x=run.floor_jobs_per_second(1000, 2)
    print(f"{time.strftime('%H:%M:%S')} files off {r:6.0f}/s  xargs {x:6.0f}/s  ratio {r/x:.2f}", flush=True)
    if len(sys.argv)>2: time.sleep(float(sys.argv[2]))
