# One-off script of run d (bench/results/HISTORY.md), kept as the record of how its figures
# were taken: 100 jobs 50 ms apart through the daemon, each one's latency split by segment:
# publish, claim, runner start and end, verdict mtime and ctime (found: file timestamps lag
# the log by up to a tick). It imports bench/run.py from this checkout (whose helpers may have
# changed since run d); /mnt/benchfs is that session's journaled ext4 (docs/performance.md
# says how to make one).
import sys, os, time, shutil, re, statistics
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import run
run.STATE_ROOT = sys.argv[1] if len(sys.argv) > 1 else None
w = run.World()
log = os.path.join(w.dir, "starts.log"); w.env["BENCH_LOG"] = log
try:
    w.start(2)
    run.wait_until(lambda: os.path.exists(os.path.join(w.state, "status.json")), 30, "ready")
    pub = {}
    for i in range(100):
        name = f"l{i:04d}"; pub[name] = time.time_ns(); w.publish_job(name); time.sleep(0.05)
    run.wait_until(lambda: run.count(w.verdicts) == 100, 60, "v")
    shutil.copy(os.path.join(w.state, "judge.log"), "/tmp/prof/lat-judge.log")
    starts = {}
    for line in open(log):
        n, ns = line.split(); starts.setdefault(n, int(ns))
    vst = {n: os.stat(os.path.join(w.verdicts, n + ".json")) for n in pub}
finally:
    w.close()
lines = open("/tmp/prof/lat-judge.log").read().splitlines()
print(lines[5][:300]); print(lines[6][:300])
import datetime
def ts(line):
    t = line.split()[0]
    return int(datetime.datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp() * 1e6) * 1000
ev = {}
for line in lines:
    m = re.search(r"(job claimed) file=\S*/(l\d{4})\.json|(runner start) id=(l\d{4})|(runner end) id=(l\d{4})|(job finished) id=(l\d{4})", line)
    if not m: continue
    g = [x for x in m.groups() if x]
    ev.setdefault(g[1], {})[g[0]] = ts(line)
seg = {k: [] for k in ["publish->claimed", "claimed->runner start log", "runner start log->runner runs", "runner runs->runner end log", "runner end log->verdict mtime", "mtime->ctime", "publish->verdict ctime"]}
for n, t in pub.items():
    e = ev[n]
    seg["publish->claimed"].append(e["job claimed"] - t)
    seg["claimed->runner start log"].append(e["runner start"] - e["job claimed"])
    seg["runner start log->runner runs"].append(starts[n] - e["runner start"])
    seg["runner runs->runner end log"].append(e["runner end"] - starts[n])
    seg["runner end log->verdict mtime"].append(vst[n].st_mtime_ns - e["runner end"])
    seg["mtime->ctime"].append(vst[n].st_ctime_ns - vst[n].st_mtime_ns)
    seg["publish->verdict ctime"].append(vst[n].st_ctime_ns - t)
for k, v in seg.items():
    v.sort()
    print(f"{k:34s} p50 {statistics.median(v)/1e6:6.3f} ms  p95 {v[int(0.95*(len(v)-1))]/1e6:6.3f} ms")
for k, v in seg.items():
    print(f"{k:34s} min {min(v)/1e6:7.3f} ms  max {max(v)/1e6:7.3f} ms  negatives {sum(1 for x in v if x < 0)}")
fin = sorted((vst[n].st_ctime_ns - ev[n]["job finished"]) / 1e6 for n in pub)
print("ctime - 'job finished' log: min %.3f p50 %.3f max %.3f ms" % (fin[0], fin[len(fin)//2], fin[-1]))
