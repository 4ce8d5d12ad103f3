# One-off script of run d (docs/performance.md), kept as the record of how its figures were taken.
# Paths are this session's (/work/main, /mnt/benchfs); run from anywhere with python3.
import sys, os, time
sys.path.insert(0, "/work/main/bench")
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
