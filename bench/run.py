#!/usr/bin/env python3
"""llm-judge benchmarks: the daemon side by side with the spawn floor, in one run.

    python3 bench/run.py                 # every workload, median of 3 runs
    python3 bench/run.py --quick         # smaller sizes, 1 run, 10 s idle (a smoke test)
    python3 bench/run.py --only backlog latency --runs 5 --json out.json

Builds the release binary and a tiny C fake runner (bench/fake_runner.c) that prints one
JSON line. Workloads (docs/performance.md explains each and the targets):
  backlog   N jobs already in jobs/, workers W: jobs/s, against `xargs -P W` starting the
            same fake runner N times (the floor), with fsync on and off
  design    1,000 jobs, workers 2, in interleaved rounds: xargs, then bench/design_floor.c
            (the design's least work per job in plain C: spawn only; plus the queue files;
            plus the per-attempt supervisor; pooled; plus the rest of the contract's per-job
            work), then the daemon; ratios to xargs
  latency   jobs published one at a time (rename into jobs/) 100 ms apart: publish to
            runner start (the runner logs it), to verdict written (its temp file closed) and
            to verdict visible (renamed into place), by the clock through inotify; p50, p95, p99
  idle      the daemon idle with an empty inbox: CPU time, wake-ups (context switches), RSS
  scale     time per job (verdicts 100 to 600) while 1k, 10k, 100k jobs wait, and peak RSS
  slow      64 jobs of a 250 ms runner, workers 8: wall time against the ideal 2.0 s
  busy      backlog (1,000 jobs, workers 2, fsync on and off) and latency, each on a quiet
            machine and then with 1,000 idle processes started by the bench (stopped
            afterwards, also on error); every floor is measured under the same condition
Runner folders go on a private tmpfs ($XDG_RUNTIME_DIR under /dev/shm), as for a systemd
user service, unless --disk-runner-folders. Only Python's standard library is used. Nothing here is a test: it asserts nothing.
"""

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import select
import struct
import tempfile
import threading
import time
import ctypes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "llm-judge")
RUNNER = os.path.join(ROOT, "target", "bench", "fake-runner")
DESIGN_FLOOR = os.path.join(ROOT, "target", "bench", "design-floor")
# Runner folders on a private tmpfs, as a systemd user service has ($XDG_RUNTIME_DIR);
# --disk-runner-folders turns it off (launchd, or a daemon started by hand).
RUNTIME_TMPFS = True
# Where the state folders go (None: the system temp folder); --state-root.
STATE_ROOT = None
CLK_TCK = os.sysconf("SC_CLK_TCK")


def build():
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    os.makedirs(os.path.dirname(RUNNER), exist_ok=True)
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-O2", "-o", RUNNER, os.path.join(ROOT, "bench", "fake_runner.c")], check=True)
    subprocess.run([cc, "-O2", "-o", DESIGN_FLOOR, os.path.join(ROOT, "bench", "design_floor.c")], check=True)


class IdleProcesses:
    """`n` sleeping processes, as on a developer's laptop; stopped on exit, also on error.
    Each dies with the bench (PR_SET_PDEATHSIG) even if the bench is killed."""

    def __init__(self, n):
        self.n = n
        self.procs = []

    def __enter__(self):
        libc = ctypes.CDLL(None, use_errno=True)

        def die_with_parent():
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

        try:
            for _ in range(self.n):
                self.procs.append(subprocess.Popen(["sleep", "100000"], stdin=subprocess.DEVNULL,
                                                   stdout=subprocess.DEVNULL, preexec_fn=die_with_parent))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            try:
                p.kill()
            except ProcessLookupError:
                pass
        for p in self.procs:
            p.wait()
        self.procs = []
        return False


def filesystem_of(path):
    """`<device> <type>` of the mount holding `path`, plus whether an ext4 has a journal:
    without one, ext4 skips (and so scans past) every inode deleted in the last 1 to 6
    minutes when it allocates, which makes file creation slow after a burst of deletions."""
    path, best = os.path.realpath(path), ("?", "?", "")
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt, fstype = line.split()[:3]
            mnt = mnt.replace("\\040", " ")
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[2]):
                best = (dev, fstype, mnt)
    dev, fstype, _ = best
    if fstype == "ext4":
        name = os.path.basename(dev)
        if not os.path.isdir(f"/sys/fs/ext4/{name}"):
            # /dev/root, /dev/mapper/...: the kernel's name from the device number.
            st = os.stat(path)
            try:
                name = os.path.basename(os.readlink(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"))
            except OSError:
                pass
        try:
            with open(f"/sys/fs/ext4/{name}/journal_task") as f:
                fstype += " (no journal)" if f.read().strip() == "<none>" else " (journal)"
        except OSError:
            pass
    return f"{dev} {fstype}"


def process_count():
    return sum(1 for e in os.listdir("/proc") if e.isdigit())


def wait_until(cond, timeout, what):
    """Polls `cond` every 5 ms until it gives something true, which it returns."""
    end = time.monotonic() + timeout
    while not (value := cond()):
        if time.monotonic() > end:
            raise TimeoutError(what)
        time.sleep(0.005)
    return value


def wait_for_count(path, target, timeout, what):
    """Waits until `path` holds `target` files. A scan of 1,000 names costs about 0.6 ms
    of CPU here, which a 5 ms poll takes from the daemon on 2 cores (the floors do not
    poll): so sleep in proportion to what is missing (0.2 ms a file, at most 100 ms),
    short of the time even a 4,000 jobs/s judge needs for it."""
    end = time.monotonic() + timeout
    while True:
        missing = target - count(path)
        if missing <= 0:
            return
        if time.monotonic() > end:
            raise TimeoutError(what)
        time.sleep(min(0.1, max(0.001, missing * 0.0002)))


def count(path):
    try:
        with os.scandir(path) as it:
            return sum(1 for e in it if not e.name.startswith("."))
    except FileNotFoundError:
        return 0


class World:
    """A state folder, a config, and at most one daemon."""

    def __init__(self, config="", runner_env=None):
        self.dir = tempfile.mkdtemp(prefix="llm-judge-bench-", dir=STATE_ROOT)
        self.state = os.path.join(self.dir, "state")
        self.jobs = os.path.join(self.state, "jobs")
        os.makedirs(self.jobs, mode=0o700)
        os.chmod(self.state, 0o700)
        self.config = os.path.join(self.dir, "config.toml")
        with open(self.config, "w") as f:
            f.write(config + "\n[cache]\nttl_seconds = 0\n")
        self.env = dict(os.environ, HOME=self.dir, XDG_CONFIG_HOME=self.dir, **(runner_env or {}))
        self.env["CATSTACK_LLM_JUDGE_RUNNERS"] = json.dumps([["fake", [RUNNER, "{prompt}"]]])
        self.env.pop("XDG_RUNTIME_DIR", None)
        self.runtime = None
        if RUNTIME_TMPFS and os.path.isdir("/dev/shm"):
            self.runtime = tempfile.mkdtemp(prefix="llm-judge-bench-run-", dir="/dev/shm")
            self.env["XDG_RUNTIME_DIR"] = self.runtime
        self.daemon = None
        # Every job has transcript "" (fast to check), so verdicts land in one folder.
        self.verdicts = os.path.join(self.state, "verdicts", "da39a3ee5e6b4b0d")

    def write_jobs(self, n, prefix="j"):
        for i in range(n):
            fd = os.open(os.path.join(self.jobs, f"{prefix}{i:06d}.json"), os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, json.dumps({"prompt": f"{prefix}{i}"}).encode())
            os.close(fd)

    def publish_job(self, name):
        """Publishes a job by rename; returns the clock just before the rename."""
        temp = os.path.join(self.jobs, f".{name}.tmp")
        with open(temp, "w") as f:
            f.write(json.dumps({"prompt": name}))
        published = time.time_ns()
        os.rename(temp, os.path.join(self.jobs, f"{name}.json"))
        return published

    def start(self, workers):
        cmd = [BIN, "--state-dir", self.state, "--config", self.config, "daemon", "--workers", str(workers)]
        self.daemon = subprocess.Popen(cmd, env=self.env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self.daemon.pid

    def stop(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(60)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        self.daemon = None

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.runtime:
            shutil.rmtree(self.runtime, ignore_errors=True)


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def proc_stat(path):
    """(name, ppid, utime, stime) from a /proc stat file, or None once it is gone."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return text[text.index("(") + 1:text.rindex(")")], int(fields[1]), int(fields[11]), int(fields[12])


def cpu_ticks(pid):
    """utime + stime of a process; 0 once it is gone."""
    stat = proc_stat(f"/proc/{pid}/stat")
    return stat[2] + stat[3] if stat else 0


def helpers_of(pid):
    """Descendants of `pid` running the same executable through such ones (the
    supervisor zygote and its pooled supervisors)."""
    exe = os.readlink(f"/proc/{pid}/exe")
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/exe") != exe:
                continue
        except OSError:
            continue
        if stat := proc_stat(f"/proc/{entry}/stat"):
            parents[int(entry)] = stat[1]
    out, frontier = [], [pid]
    while frontier:
        children = [p for p, pp in parents.items() if pp in frontier]
        out += children
        frontier = children
    return out


def context_switches(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            for line in f:
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(line.split()[1])
    return total


def floor_jobs_per_second(n, workers):
    """The physical floor: the same runner started n times, `workers` at once, by xargs."""
    t0 = time.monotonic()
    seq = subprocess.Popen(["seq", str(n)], stdout=subprocess.PIPE)
    subprocess.run(["xargs", "-P", str(workers), "-n", "1", RUNNER], stdin=seq.stdout,
                   stdout=subprocess.DEVNULL, check=True)
    seq.wait()
    return n / (time.monotonic() - t0)


def design_floor(level, n, workers, fsync):
    """bench/design_floor.c at `level` (spawn, files, super, pooled, spec) on n jobs: jobs/s."""
    w = World()
    try:
        w.write_jobs(n)
        for sub in ("claims", "verdicts"):
            os.makedirs(os.path.join(w.state, sub), mode=0o700)
        tmp = os.path.join(w.state, "tmp")
        if w.runtime:
            os.symlink(w.runtime, tmp)
        else:
            os.makedirs(tmp, mode=0o700)
        t0 = time.monotonic()
        # The spec level copies its log lines to stderr, as the daemon does to its /dev/null.
        subprocess.run([DESIGN_FLOOR, level, w.state, str(n), str(workers), "1" if fsync else "0", RUNNER],
                       stdout=subprocess.DEVNULL, check=True,
                       stderr=subprocess.DEVNULL if level == "spec" else None)
        return n / (time.monotonic() - t0)
    finally:
        w.close()


def busy_ticks():
    """CPU ticks the whole machine spent working (kernel threads too): user, nice, system,
    irq and softirq; not idle, iowait or a VM's steal (guest time is inside user)."""
    with open("/proc/stat") as f:
        t = [int(x) for x in f.readline().split()[1:]]
    return t[0] + t[1] + t[2] + t[5] + t[6]


def design(rounds, n):
    """The daemon against xargs and the design floor's levels, interleaved in rounds
    so a noisy machine hurts all alike; medians of per-round ratios to xargs, and of the
    machine's CPU time per job (all CPUs, the bench's own polling included)."""
    names = ["spawn", "files_off", "files_on", "super_off", "super_on", "pooled_off", "pooled_on",
             "spec_off", "spec_on", "daemon_off", "daemon_on"]
    ratios = {k: [] for k in names}
    cpu = {k: [] for k in ["xargs"] + names}
    floors = []
    per_job_ms = lambda ticks: ticks / CLK_TCK * 1000 / n
    for _ in range(rounds):
        c0 = busy_ticks()
        floor = floor_jobs_per_second(n, 2)
        floors.append(floor)
        cpu["xargs"].append(per_job_ms(busy_ticks() - c0))
        for k in names:
            level, fsync = (k.split("_") + ["off"])[:2]
            fsync = fsync == "on"
            c0 = busy_ticks()
            jps = backlog(n, 2, fsync) if level == "daemon" else design_floor(level, n, 2, fsync)
            cpu[k].append(per_job_ms(busy_ticks() - c0))
            ratios[k].append(jps / floor)
    out = {k: statistics.median(v) for k, v in ratios.items()}
    out.update({"cpu_" + k: statistics.median(v) for k, v in cpu.items()})
    out["floor_jps"] = statistics.median(floors)
    return out


def backlog(n, workers, fsync):
    w = World(config=f"fsync = {'true' if fsync else 'false'}")
    try:
        w.write_jobs(n)
        t0 = time.monotonic()
        w.start(workers)
        # Verdicts first: the jobs folder empties before the last verdicts land.
        wait_for_count(w.verdicts, n, 3600, "backlog")
        rate = n / (time.monotonic() - t0)
        wait_until(lambda: count(w.jobs) == 0, 60, "backlog jobs removed")
        return rate
    finally:
        w.close()


class FolderEvents:
    """When files were written (closed after writing) and renamed into one folder, by
    the clock, from inotify on a reader thread. File timestamps will not do: the kernel
    stamps a file it was not asked about since its last change with a coarse clock, up
    to a tick (4 ms at HZ=250) behind, which hid up to 4 ms of the publish latency."""

    IN_CLOSE_WRITE, IN_MOVED_TO, IN_Q_OVERFLOW = 0x8, 0x80, 0x4000

    def __init__(self, path):
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_CLOEXEC)
        if self.fd < 0 or libc.inotify_add_watch(
                self.fd, os.fsencode(path), self.IN_CLOSE_WRITE | self.IN_MOVED_TO) < 0:
            raise OSError(ctypes.get_errno(), f"inotify on {path}")
        self.written, self.moved, self.overflowed = {}, {}, False
        self.lock = threading.Lock()
        self.stop_r, self.stop_w = os.pipe()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while True:
            ready, _, _ = select.select([self.fd, self.stop_r], [], [])
            if self.stop_r in ready:
                return
            # Stamped when this thread wakes: late by its scheduling (0.07 ms p50 idle).
            data, now = os.read(self.fd, 65536), time.time_ns()
            off = 0
            with self.lock:
                while off + 16 <= len(data):
                    _, mask, _, n = struct.unpack_from("iIII", data, off)
                    name = data[off + 16:off + 16 + n].rstrip(b"\0").decode(errors="replace")
                    off += 16 + n
                    if mask & self.IN_Q_OVERFLOW:
                        self.overflowed = True
                    elif mask & self.IN_MOVED_TO:
                        self.moved.setdefault(name, now)
                    elif mask & self.IN_CLOSE_WRITE:
                        self.written.setdefault(name, now)

    def close(self):
        os.write(self.stop_w, b"x")
        self.thread.join(10)
        for fd in (self.fd, self.stop_r, self.stop_w):
            os.close(fd)

    def arrived(self, jobs):
        """The (written, visible) times of each of `jobs` once all are in, else None."""
        with self.lock:
            if self.overflowed:
                raise RuntimeError("inotify queue overflowed: latency events were lost")
            written = {}
            for name, t in self.written.items():
                # The verdict's temp file is `.<job>.json.<pid>.<n>.tmp`.
                job = name[1:].split(".json.", 1)[0] if name.startswith(".") else None
                if job in jobs:
                    written[job] = min(t, written.get(job, t))
            moved = {j: self.moved.get(j + ".json") for j in jobs}
        if len(written) < len(jobs) or None in moved.values():
            return None
        return {j: (written[j], moved[j]) for j in jobs}


def latency(jobs, gap, config=""):
    w = World(config=config, runner_env={"BENCH_LOG": "/dev/null"})
    log = os.path.join(w.dir, "starts.log")
    w.env["BENCH_LOG"] = log
    events = None
    try:
        os.makedirs(w.verdicts, mode=0o700)
        os.chmod(os.path.dirname(w.verdicts), 0o700)
        events = FolderEvents(w.verdicts)
        w.start(2)
        wait_until(lambda: os.path.exists(os.path.join(w.state, "status.json")), 30, "daemon ready")
        published = {}
        for i in range(jobs):
            name = f"l{i:04d}"
            published[name] = w.publish_job(name)
            time.sleep(gap)
        # Every verdict renamed into place (and so every runner start logged) first.
        seen = wait_until(lambda: events.arrived(published), 120, "latency verdicts")
        starts = {}
        with open(log) as f:
            for line in f:
                name, ns = line.split()
                starts.setdefault(name, int(ns))
        to_start = sorted((starts[n] - t) / 1e6 for n, t in published.items())
        # Written: the verdict's temp file closed after its write (and fsync); visible:
        # renamed into place, which with fsync on comes after the claim's fsyncs too.
        to_verdict = sorted((seen[n][0] - t) / 1e6 for n, t in published.items())
        to_visible = sorted((seen[n][1] - t) / 1e6 for n, t in published.items())
        return {"start_p50_ms": pct(to_start, 50), "start_p95_ms": pct(to_start, 95),
                "start_p99_ms": pct(to_start, 99), "verdict_p50_ms": pct(to_verdict, 50),
                "verdict_p95_ms": pct(to_verdict, 95), "verdict_p99_ms": pct(to_verdict, 99),
                "visible_p50_ms": pct(to_visible, 50), "visible_p95_ms": pct(to_visible, 95),
                "visible_p99_ms": pct(to_visible, 99)}
    finally:
        if events:
            events.close()
        w.close()


def pct(sorted_values, p):
    k = max(0, min(len(sorted_values) - 1, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


def idle(seconds):
    w = World()
    try:
        pid = w.start(4)
        wait_until(lambda: os.path.exists(os.path.join(w.state, "status.json")), 30, "daemon ready")
        time.sleep(2)
        ticks0, ctx0 = cpu_ticks(pid), context_switches(pid)
        time.sleep(seconds)
        ticks1, ctx1 = cpu_ticks(pid), context_switches(pid)
        return {"cpu_percent": (ticks1 - ticks0) / CLK_TCK / seconds * 100,
                "wakeups_per_second": (ctx1 - ctx0) / seconds,
                "rss_mb": proc_status(pid, "VmRSS") / 1024}
    finally:
        w.close()


def scale(waiting, measured):
    """Seconds per job while `waiting` jobs wait (steady state: verdicts 100 to 100+measured)."""
    w = World()
    try:
        w.write_jobs(waiting)
        pid = w.start(8)
        wait_for_count(w.verdicts, 100, 600, "scale warm-up")
        t1 = time.monotonic()
        wait_for_count(w.verdicts, 100 + measured, 3600, "scale")
        per_job = (time.monotonic() - t1) / measured
        return {"ms_per_job": per_job * 1000, "peak_rss_mb": proc_status(pid, "VmHWM") / 1024}
    finally:
        w.close()


def slow(jobs, workers, delay_ms):
    w = World(runner_env={"BENCH_DELAY_MS": str(delay_ms)})
    try:
        w.write_jobs(jobs)
        t0 = time.monotonic()
        w.start(workers)
        wait_for_count(w.verdicts, jobs, 600, "slow")
        wall = time.monotonic() - t0
        wait_until(lambda: count(w.jobs) == 0, 60, "slow jobs removed")
        ideal = jobs / workers * delay_ms / 1000
        return {"wall_s": wall, "ideal_s": ideal, "ratio": wall / ideal}
    finally:
        w.close()


def busy(runs, n, latency_jobs):
    """Backlog and latency quiet, then with 1,000 idle processes; each run does both
    conditions back to back so a ratio never spans minutes of machine noise."""
    samples = {"quiet": [], "busy": []}
    for _ in range(runs):
        for cond in ("quiet", "busy"):
            ctx = IdleProcesses(1000) if cond == "busy" else IdleProcesses(0)
            with ctx:
                r = {"processes": process_count()}
                floor = floor_jobs_per_second(n, 2)
                on = backlog(n, 2, True)
                off = backlog(n, 2, False)
                r.update(floor_jps=floor, fsync_on_jps=on, fsync_off_jps=off,
                         ratio_on=on / floor, ratio_off=off / floor)
                r.update(latency(latency_jobs, 0.1))
                samples[cond].append(r)
    out = {cond: {k: statistics.median(x[k] for x in rows) for k in rows[0]}
           for cond, rows in samples.items()}
    out["busy_vs_quiet_on"] = out["busy"]["fsync_on_jps"] / out["quiet"]["fsync_on_jps"]
    out["busy_vs_quiet_off"] = out["busy"]["fsync_off_jps"] / out["quiet"]["fsync_off_jps"]
    return out


def median_of(runs, fn):
    results = [fn() for _ in range(runs)]
    if isinstance(results[0], dict):
        return {k: statistics.median(r[k] for r in results) for k in results[0]}
    return statistics.median(results)


LATENCY = ("latency  to runner start p50 {start_p50_ms:.1f} ms  p95 {start_p95_ms:.1f} ms  p99 {start_p99_ms:.1f} ms;  "
           "to verdict written p50 {verdict_p50_ms:.1f} ms  p95 {verdict_p95_ms:.1f} ms  p99 {verdict_p99_ms:.1f} ms;  "
           "to verdict visible p50 {visible_p50_ms:.1f} ms  p95 {visible_p95_ms:.1f} ms  p99 {visible_p99_ms:.1f} ms")


def main():
    # A SIGTERM unwinds like an error, so the idle processes are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="*",
                    default=["backlog", "design", "latency", "idle", "scale", "slow", "busy"])
    ap.add_argument("--disk-runner-folders", action="store_true",
                    help="no $XDG_RUNTIME_DIR for the daemon: runner folders on disk, in <state>/tmp")
    ap.add_argument("--state-root", help="make the state folders here (default: the system temp "
                    "folder); the filesystem of the queue's files, see docs/performance.md")
    ap.add_argument("--idle-seconds", type=float, default=60)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    runs = 1 if args.quick else args.runs
    global RUNTIME_TMPFS, STATE_ROOT
    RUNTIME_TMPFS = not args.disk_runner_folders
    STATE_ROOT = args.state_root
    build()
    out = {"machine": {"cpus": os.cpu_count(), "kernel": platform.release(),
                       "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                                    if l.startswith("model name")), "?")},
           "runs": runs, "runner_folders": "tmpfs" if RUNTIME_TMPFS else "disk",
           "state_fs": filesystem_of(STATE_ROOT or tempfile.gettempdir())}
    print(f"machine: {out['machine']}, median of {runs} run(s), state folders on {out['state_fs']}, "
          f"runner folders on {out['runner_folders']}")
    if "(no journal)" in out["state_fs"]:
        print("note: an ext4 without a journal slows file creation for minutes after many deletions, "
              "so figures here depend on what ran before; --state-root a journaled filesystem "
              "(bench/results/HISTORY.md, run d)", flush=True)
    if "backlog" in args.only:
        rows = []
        for n in ([300] if args.quick else [1000, 10000]):
            for workers in (2, 8):
                floor = median_of(runs, lambda: floor_jobs_per_second(n, workers))
                on = median_of(runs, lambda: backlog(n, workers, True))
                off = median_of(runs, lambda: backlog(n, workers, False))
                row = {"jobs": n, "workers": workers, "floor_jps": floor, "fsync_on_jps": on,
                       "fsync_off_jps": off, "ratio_on": on / floor, "ratio_off": off / floor}
                rows.append(row)
                print("backlog  {jobs:>6} jobs  workers {workers}  floor {floor_jps:7.0f}/s  "
                      "fsync on {fsync_on_jps:7.0f}/s ({ratio_on:.2f})  off {fsync_off_jps:7.0f}/s "
                      "({ratio_off:.2f})".format(**row), flush=True)
        out["backlog"] = rows
    if "design" in args.only:
        r = design(runs, 300 if args.quick else 1000)
        out["design"] = r
        print(f"design   {300 if args.quick else 1000} jobs  workers 2, of the xargs floor: C spawn {{spawn:.2f}}; C + files fsync off "
              "{files_off:.2f} on {files_on:.2f}; C + files + supervisor off {super_off:.2f} on {super_on:.2f}; "
              "C + files + pooled supervisor off {pooled_off:.2f} on {pooled_on:.2f}; "
              "C + the contract's per-job work off {spec_off:.2f} on {spec_on:.2f}; "
              "daemon off {daemon_off:.2f} on {daemon_on:.2f}".format(**r), flush=True)
        print("design   machine CPU per job: xargs {cpu_xargs:.2f} ms (at {floor_jps:.0f}/s); C spawn {cpu_spawn:.2f}; C + files off "
              "{cpu_files_off:.2f} on {cpu_files_on:.2f}; C + files + supervisor off {cpu_super_off:.2f} on "
              "{cpu_super_on:.2f}; C + files + pooled supervisor off {cpu_pooled_off:.2f} on {cpu_pooled_on:.2f}; "
              "C + the contract's per-job work off {cpu_spec_off:.2f} on {cpu_spec_on:.2f}; daemon off {cpu_daemon_off:.2f} on {cpu_daemon_on:.2f}".format(**r), flush=True)
    if "latency" in args.only:
        r = median_of(runs, lambda: latency(40 if args.quick else 200, 0.1))
        out["latency"] = r
        print(LATENCY.format(**r), flush=True)
        r = median_of(runs, lambda: latency(40 if args.quick else 200, 0.1, "fsync = false"))
        out["latency_fsync_off"] = r
        print("fsync off: " + LATENCY.format(**r), flush=True)
    if "idle" in args.only:
        r = idle(10 if args.quick else args.idle_seconds)
        out["idle"] = r
        print("idle     cpu {cpu_percent:.4f} %  wake-ups {wakeups_per_second:.2f}/s  "
              "rss {rss_mb:.1f} MB".format(**r), flush=True)
    if "scale" in args.only:
        rows = []
        for waiting in ([1000, 10000] if args.quick else [1000, 10000, 100000]):
            r = median_of(1 if waiting >= 100000 else runs, lambda: scale(waiting, 500))
            r["waiting"] = waiting
            rows.append(r)
            print("scale    {waiting:>6} waiting  {ms_per_job:.2f} ms/job  peak rss {peak_rss_mb:.1f} MB"
                  .format(**r), flush=True)
        base = rows[0]["ms_per_job"]
        for r in rows:
            r["vs_1000"] = r["ms_per_job"] / base
        out["scale"] = rows
    if "slow" in args.only:
        r = median_of(runs, lambda: slow(64, 8, 250))
        out["slow"] = r
        print("slow     64 x 250 ms, workers 8: {wall_s:.2f} s against ideal {ideal_s:.2f} s "
              "(ratio {ratio:.3f})".format(**r), flush=True)
    if "busy" in args.only:
        r = busy(runs, 300 if args.quick else 1000, 40 if args.quick else 200)
        out["busy"] = r
        for cond in ("quiet", "busy"):
            print(f"{cond:<5}    {{processes:.0f}} processes  backlog workers 2  floor {{floor_jps:7.0f}}/s  "
                  "fsync on {fsync_on_jps:7.0f}/s ({ratio_on:.2f})  off {fsync_off_jps:7.0f}/s ({ratio_off:.2f})"
                  .format(**r[cond]), flush=True)
            print(f"{cond:<5}    " + LATENCY.format(**r[cond]), flush=True)
        print("busy     throughput busy / quiet: fsync on {busy_vs_quiet_on:.2f}, off {busy_vs_quiet_off:.2f}"
              .format(**r), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
