# One-off script of run d (docs/performance.md), kept as the record of how its figures were taken.
# Paths are this session's (/work/main, /mnt/benchfs); run from anywhere with python3.
import sys, os, time, subprocess
sys.path.insert(0, "/work/main/bench")
import run
run.STATE_ROOT = "/mnt/benchfs"
w = run.World(runner_env={"BENCH_LOG": "/tmp/prof/tl-starts.log"})
try:
    pid = w.start(2)
    run.wait_until(lambda: os.path.exists(os.path.join(w.state, "status.json")), 30, "ready")
    z = [e for e in os.listdir("/proc") if e.isdigit() and os.path.exists(f"/proc/{e}/stat") and open(f"/proc/{e}/stat").read().rsplit(")",1)[1].split()[1] == str(pid)][0]
    tr = subprocess.Popen(["strace", "-f", "-ttt", "-o", "/tmp/prof/tl.txt", "-p", str(pid), "-p", z], stderr=subprocess.DEVNULL)
    time.sleep(1)
    for i in range(5):
        print("publish", f"l{i}", "%.6f" % time.time()); w.publish_job(f"l{i}"); time.sleep(0.2)
    time.sleep(0.5)
    tr.send_signal(2); tr.wait(10)
finally:
    w.close()
