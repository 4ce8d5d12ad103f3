# One-off script of run d (bench/results/HISTORY.md), kept as the record of how its figures
# were taken: strace -f -ttt of the daemon and its zygote while five jobs are published 200 ms
# apart (a timeline of one job's system calls). It imports bench/run.py from this checkout
# (whose helpers may have changed since run d); /mnt/benchfs is that session's journaled ext4
# (docs/performance.md says how to make one).
import sys, os, time, subprocess
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
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
