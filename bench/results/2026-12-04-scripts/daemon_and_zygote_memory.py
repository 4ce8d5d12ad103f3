# One-off script of run d (bench/results/HISTORY.md), kept as the record of how its figures
# were taken: VmRSS, VmPTE, VmSize, mappings and threads of the idle daemon and its supervisor
# zygote, with the zygote's mappings. It imports bench/run.py from this checkout (whose
# helpers may have changed since run d); /mnt/benchfs is that session's journaled ext4
# (docs/performance.md says how to make one).
import sys, os, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import run
w = run.World()
try:
    pid = w.start(2)
    run.wait_until(lambda: os.path.exists(os.path.join(w.state, "status.json")), 30, "ready")
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                st = open(f"/proc/{e}/stat").read().rsplit(")",1)[1].split()
            except OSError: continue
            if int(st[1]) == pid:
                z = e
    for p, label in ((pid, "daemon"), (z, "zygote")):
        s = {l.split(":")[0]: l.split(":")[1].strip() for l in open(f"/proc/{p}/status")}
        maps = open(f"/proc/{p}/maps").read().splitlines()
        print(label, "VmRSS", s["VmRSS"], "VmPTE", s["VmPTE"], "VmSize", s["VmSize"], "maps", len(maps), "threads", s["Threads"])
        if label == "zygote":
            for m in maps: print("  ", m[:120])
finally:
    w.close()
