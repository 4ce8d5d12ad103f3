# One-off script of run d (bench/results/HISTORY.md), kept as the record of how its figures
# were taken: jobs/s and machine CPU per job (from /proc/stat) of xargs, each C design-floor
# level and the daemon, fsync off and on, two rounds. It imports bench/run.py from this
# checkout (whose helpers may have changed since run d); /mnt/benchfs is that session's
# journaled ext4 (docs/performance.md says how to make one).
import sys, time, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import run
run.STATE_ROOT = "/mnt/benchfs"
run.RUNTIME_TMPFS = True
def ticks():
    f=[int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(f)-f[3]-f[4]
def meas(name, fn, n=1000):
    c0=ticks(); r=fn(); c=(ticks()-c0)/os.sysconf("SC_CLK_TCK")*1000/n
    print(f"{name:28s} {r:7.0f} jobs/s  machine CPU {c:.2f} ms/job", flush=True)
for _ in range(2):
    meas("xargs -P 2", lambda: run.floor_jobs_per_second(1000, 2))
    meas("C spawn", lambda: run.design_floor("spawn", 1000, 2, False))
    meas("C files off", lambda: run.design_floor("files", 1000, 2, False))
    meas("C files on", lambda: run.design_floor("files", 1000, 2, True))
    meas("C super off", lambda: run.design_floor("super", 1000, 2, False))
    meas("C super on", lambda: run.design_floor("super", 1000, 2, True))
    meas("daemon off", lambda: run.backlog(1000, 2, False))
    meas("daemon on", lambda: run.backlog(1000, 2, True))
