#!/usr/bin/env python3
"""What a hook waits for with a pre-started claude: job file published to model request,
and to verdict visible, through the daemon with the real Claude Code (issue 33 item 4).

    flock /work/cargo.lock python3 bench/prestart.py                  # 20 jobs per variant
    python3 bench/prestart.py --jobs 10 --out bench/results/X.txt --json bench/results/X.json

Builds the release binary (unless --no-build), then runs three daemons side by side, each
with its own state folder, HOME, TMPDIR and stand-in model API (bench/startup.py's), the
real `claude` (target/real-runners/node_modules/.bin, or --bin-dir) on PATH, one worker,
the cache and runner health off, and a one-runner default table:
  old  the claude argv the daemon shipped before `prestart`: prompt in argv,
       `--output-format json`, spawned with each job (the baseline)
  off  the shipped argv (stream-json, prompt on stdin) with `prestart = 0`: spawned with
       each job, the message written at once
  on   the shipped runner as shipped: `prestart = 1`, a waiting claude takes each job
Jobs are interleaved (old, off, on, old, ...), one at a time: before each job every daemon
is idle and the `on` daemon's replacement claude is waiting, so no start-up of one variant
overlaps a job of another. The first job of each daemon is a warm-up (claude's first-run
files in the fresh HOME) and is not counted. Metrics per job, from the rename that
publishes the job file:
  to request   until the stand-in has read the model request (POST /v1/messages)
  to verdict   until the verdict file exists (polled every 0.5 ms)
Reported: median and p90 (nearest rank) of each, and the ratio of the medians to `old`.
Only Python's standard library is used. Nothing here is a test: it asserts nothing.
"""

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import startup  # noqa: E402  (the stand-in, the shipped argv)

ROOT = startup.ROOT
BIN = os.path.join(ROOT, "target", "release", "llm-judge")


def toml_list(argv):
    return "[" + ", ".join(json.dumps(a) for a in argv) + "]"


class Daemon:
    """One llm-judge daemon with its own state, HOME, stand-in and runner table."""

    def __init__(self, key, argv, prestart, bin_dir):
        self.key = key
        self.standin = startup.StandIn()
        self.root = tempfile.mkdtemp(prefix="llm-judge-prestart-%s-" % key)
        home, tmp, bindir = (os.path.join(self.root, n) for n in ("home", "tmp", "bin"))
        self.state = os.path.join(self.root, "state")
        for d in (home, tmp, bindir, self.state, os.path.join(self.state, "jobs")):
            os.makedirs(d, mode=0o700)
        os.symlink(os.path.realpath(os.path.join(bin_dir, "claude")),
                   os.path.join(bindir, "claude"))
        config = os.path.join(self.root, "config.toml")
        with open(config, "w") as f:
            f.write("workers = 1\n[health]\nenabled = false\n[cache]\nttl_seconds = 0\n"
                    "[[runners.default]]\nname = \"claude\"\nargv = %s\nprestart = %d\n"
                    % (toml_list(argv), prestart))
        env = {
            "HOME": home, "TMPDIR": tmp, "XDG_CONFIG_HOME": os.path.join(home, ".config"),
            "PATH": "%s:/usr/local/bin:/usr/bin:/bin" % bindir,
            "ANTHROPIC_BASE_URL": self.standin.url(), "ANTHROPIC_API_KEY": "dummy",
        }
        self.err = open(os.path.join(self.root, "daemon.err"), "w")
        self.proc = subprocess.Popen(
            [BIN, "--state-dir", self.state, "--config", config, "daemon"], env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.err)
        self.prestart = prestart
        self.jobs = 0

    def log(self):
        try:
            with open(os.path.join(self.state, "judge.log")) as f:
                return f.read()
        except OSError:
            return ""

    def wait_ready(self, deadline=60):
        """Until the daemon is up and, with prestart, as many claudes waiting as jobs run + 1."""
        want = self.jobs + 1 if self.prestart else 0
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            log = self.log()
            if "daemon start" in log and log.count("runner pre-started") >= want:
                return
            time.sleep(0.01)
        raise SystemExit("%s: daemon not ready:\n%s" % (self.key, self.log()))

    def judge(self, n):
        """Publishes job n; returns (to request, to verdict) in seconds."""
        self.wait_ready()
        stem = "j%d" % n
        transcript = "bench-%s" % self.key
        job = {"prompt": 'Job %d. Is the sky blue? Reply {"ok": true} or {"ok": false}.' % n,
               "hit_if_all_true": ["ok"], "transcript": transcript}
        jobs = os.path.join(self.state, "jobs")
        temp = os.path.join(jobs, ".%s.tmp" % stem)
        with open(temp, "w") as f:
            json.dump(job, f)
        folder = hashlib.sha1(transcript.encode()).hexdigest()[:16]
        verdict = os.path.join(self.state, "verdicts", folder, stem + ".json")
        before = len(self.model_requests())
        t0 = time.monotonic()
        os.rename(temp, os.path.join(jobs, stem + ".json"))
        while not os.path.exists(verdict):
            if time.monotonic() - t0 > 60:
                raise SystemExit("%s: no verdict for %s:\n%s" % (self.key, stem, self.log()))
            time.sleep(0.0005)
        t_verdict = time.monotonic() - t0
        self.jobs += 1
        with open(verdict) as f:
            v = json.load(f)
        if v.get("outcome") != "hit":
            raise SystemExit("%s: verdict %s" % (self.key, v))
        reqs = self.model_requests()[before:]
        if not reqs:
            raise SystemExit("%s: no model request for %s" % (self.key, stem))
        return reqs[0]["t"] - t0, t_verdict

    def model_requests(self):
        return [r for r in self.standin.snapshot() if r["kind"] == "model"]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()
        self.standin.close()
        shutil.rmtree(self.root, ignore_errors=True)


def pct(xs, q):
    xs = sorted(xs)
    return xs[max(0, min(len(xs) - 1, int(round(q * len(xs) + 0.5)) - 1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=20, help="counted jobs per variant (20)")
    ap.add_argument("--bin-dir", default=startup.BIN_DIR)
    ap.add_argument("--no-build", action="store_true", help="use target/release as it is")
    ap.add_argument("--out", help="also write the report here")
    ap.add_argument("--json", help="write every job's figures here")
    args = ap.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    shipped = startup.shipped("claude")
    variants = [("old", startup.spawned_claude(shipped), 0), ("off", shipped, 0),
                ("on", shipped, 1)]
    report = []

    def say(line=""):
        print(line, flush=True)
        report.append(line)

    version = subprocess.run([os.path.join(args.bin_dir, "claude"), "--version"],
                             capture_output=True, text=True).stdout.strip()
    say("bench/prestart.py, %s, %d CPUs, %s, claude %s, load %s" % (
        time.strftime("%Y-%m-%d %H:%M"), os.cpu_count(), platform.release(), version,
        open("/proc/loadavg").read().split()[:3]))
    daemons = [Daemon(k, argv, p, args.bin_dir) for k, argv, p in variants]
    figures = {k: [] for k, _, _ in variants}
    try:
        for d in daemons:
            d.judge(0)  # warm-up
        for n in range(1, args.jobs + 1):
            for d in daemons:
                figures[d.key].append(d.judge(n))
    finally:
        for d in daemons:
            d.stop()
    say("%d counted jobs per variant, interleaved, one at a time; load at end %s" % (
        args.jobs, open("/proc/loadavg").read().split()[:3]))
    say()
    say("| variant | to request, median | p90 | ratio | to verdict, median | p90 | ratio |")
    say("|---|---|---|---|---|---|---|")
    base = figures["old"]
    base_req = pct([r for r, _ in base], 0.5)
    base_ver = pct([v for _, v in base], 0.5)
    labels = {"old": "old: spawned, prompt in argv (baseline)",
              "off": "off: shipped argv, prestart = 0",
              "on": "on: shipped, prestart = 1"}
    for k, _, _ in variants:
        req = [r for r, _ in figures[k]]
        ver = [v for _, v in figures[k]]
        say("| %s | %.0f ms | %.0f ms | %.2f | %.0f ms | %.0f ms | %.2f |" % (
            labels[k], 1000 * pct(req, 0.5), 1000 * pct(req, 0.9),
            pct(req, 0.5) / base_req, 1000 * pct(ver, 0.5), 1000 * pct(ver, 0.9),
            pct(ver, 0.5) / base_ver))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(report) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({k: [{"to_request": r, "to_verdict": v} for r, v in figs]
                       for k, figs in figures.items()}, f, indent=1)


if __name__ == "__main__":
    main()
