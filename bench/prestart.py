#!/usr/bin/env python3
"""From the job's publish to its verdict, through the daemon, with a pre-started claude, a
pre-started codex and runners spawned with their jobs (issue 33 item 4, issue 42 items 2
and 5).

    flock /work/cargo.lock cargo build --release
    python3 bench/prestart.py                                   # 12 jobs per variant
    python3 bench/prestart.py --jobs 20 --out bench/results/X.txt --json bench/results/X.json
    python3 bench/prestart.py --only fake --bin /tmp/llm-judge-before   # another build

Runs one daemon per variant side by side (target/release/llm-judge, or --bin), each with
its own state folder, HOME, TMPDIR and stand-in model API (bench/startup.py's), the real
CLIs of target/real-runners (or --bin-dir) on PATH, one worker and the cache off:
  cold        claude spawned with each job, prompt in argv, `--output-format json` (the
              argv shipped before `prestart`), health off: the baseline
  claude      the shipped claude as shipped (stream-json, `prestart = 1`), health off
  codex       the shipped default table's claude and codex, both `prestart = 1`, health on
              (a day's bench), and no claude login (no API key): the warm-up job benches
              claude, after which the daemon keeps a codex waiting (`-` for its prompt,
              which comes on stdin)
  codex-cold  the shipped codex alone, spawned with each job
  fake        a stream-json fake claude (Python), pre-started, that prints its `result`
              event, notes the time, then lingers --linger s before it exits: the gap
              between its final event and the verdict
Every runner gets the shipped claude's `env`; codex gets `-c openai_base_url=<stand-in>`.
Jobs are interleaved (cold, claude, codex, ...), one at a time, --settle s apart, and each
waits until its daemon has a copy waiting where the variant pre-starts. The first job of
each daemon is a warm-up (first-run files in the fresh HOME; for codex, the bench of
claude) and is not counted. Metrics per job, from the rename that publishes the job file
(monotonic clock, verdict file polled every 0.5 ms):
  to request   until the stand-in has read the model request
  to verdict   until the verdict file exists
  start to request  judge.log's `runner start` line (written right before a cold
              runner's spawn, or a waiting copy's prompt) to the model request (wall clock)
  final to verdict  (fake) the fake's final event to the verdict file
Reported: median and p90 (nearest rank), and the medians' ratios to `cold`. Only Python's
standard library is used. Nothing here is a test: it asserts nothing.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import startup  # noqa: E402  (the stand-in, the shipped argv, the judge's codex files)

ROOT = startup.ROOT
BIN = os.path.join(ROOT, "target", "release", "llm-judge")
FAKE = r'''#!/usr/bin/env python3
import json, os, sys, time
sys.stdin.readline()
event = {"type": "result", "subtype": "success", "is_error": False, "session_id": "s",
         "result": "{\"ok\": true}", "usage": {"input_tokens": 3, "output_tokens": 1}}
sys.stdout.write(json.dumps(event) + "\n")
sys.stdout.flush()
t = time.monotonic()
with open(os.environ["BENCH_FINAL_LOG"], "a") as f:
    f.write("%.6f\n" % t)
time.sleep(float(os.environ.get("BENCH_LINGER", "0.5")))
'''


def toml_value(v):
    if isinstance(v, list):
        return "[" + ", ".join(json.dumps(a) for a in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join("%s = %s" % (k, json.dumps(x)) for k, x in v.items()) + " }"
    return json.dumps(v) if isinstance(v, str) else str(v)


def shipped_entry(name):
    with open(startup.CONFIG, "rb") as f:
        cfg = tomllib.load(f)
    for r in cfg["runners"]["default"]:
        if r["name"] == name:
            return dict(r)
    raise SystemExit("no default runner %r in %s" % (name, startup.CONFIG))


def wall_of(line):
    """A judge.log line's leading UTC timestamp as Unix seconds, or None."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z", line)
    if not m:
        return None
    t = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc)
    return t.timestamp()


def stage_job(state, stem, transcript, n):
    """Writes job n (a one-line question with a rule) as `stem` under a temp name in
    `state`/jobs/; returns the call that publishes it (by rename) and the path its
    verdict will have."""
    job = {"prompt": 'Job %d. Is the sky blue? Reply {"ok": true} or {"ok": false}.' % n,
           "hit_if_all_true": ["ok"], "transcript": transcript}
    jobs = os.path.join(state, "jobs")
    temp = os.path.join(jobs, ".%s.tmp" % stem)
    with open(temp, "w") as f:
        json.dump(job, f)
    folder = hashlib.sha1(transcript.encode()).hexdigest()[:16]
    verdict = os.path.join(state, "verdicts", folder, stem + ".json")
    return (lambda: os.rename(temp, os.path.join(jobs, stem + ".json"))), verdict


def read_hit(path, t0, limit, poll, fail):
    """Polls every `poll` s, at most `limit` s after `t0`, for the verdict at `path`;
    returns when it appeared and the verdict, which must be a hit (else `fail(why)`)."""
    while not os.path.exists(path):
        if time.monotonic() - t0 > limit:
            fail("no verdict for %s" % os.path.basename(path))
        time.sleep(poll)
    t = time.monotonic()
    with open(path) as f:
        v = json.load(f)
    if v.get("outcome") != "hit":
        fail("verdict %s" % v)
    return t, v


class BenchDaemon:
    """A daemon under bench: `key`, its `root` folder, `state` folder and `standin`, set
    by the subclass, which then calls `start`."""

    def start(self, binary, config, env):
        """Starts the daemon on `config` with exactly `env`; its stderr in the root."""
        self.err = open(os.path.join(self.root, "daemon.err"), "w")
        self.proc = subprocess.Popen(
            [binary, "--state-dir", self.state, "--config", config, "daemon"], env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.err)

    def log(self):
        try:
            with open(os.path.join(self.state, "judge.log")) as f:
                return f.read()
        except OSError:
            return ""

    def fail(self, why):
        """Ends the bench with `why` and the end of judge.log."""
        raise SystemExit("%s: %s\n%s" % (self.key, why, self.log()[-4000:]))

    def wait_log(self, ready, deadline):
        """Until `ready(judge.log's text)`, at most `deadline` seconds."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if ready(self.log()):
                return
            time.sleep(0.01)
        self.fail("daemon not ready")

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


class Daemon(BenchDaemon):
    """One llm-judge daemon with its own state, HOME, stand-in and runner table."""

    def __init__(self, key, args):
        self.key = key
        self.standin = startup.StandIn()
        # The stand-in stamps requests with the monotonic clock; judge.log with UTC.
        self.wall_offset = time.time() - time.monotonic()
        self.root = tempfile.mkdtemp(prefix="llm-judge-prestart-%s-" % key)
        home, tmp, bindir = (os.path.join(self.root, n) for n in ("home", "tmp", "bin"))
        self.state = os.path.join(self.root, "state")
        for d in (home, tmp, bindir, self.state, os.path.join(self.state, "jobs")):
            os.makedirs(d, mode=0o700)
        for cli in ("claude", "codex"):
            os.symlink(os.path.realpath(os.path.join(args.bin_dir, cli)),
                       os.path.join(bindir, cli))
        self.final_log = os.path.join(self.root, "final.log")
        claude, codex = shipped_entry("claude"), shipped_entry("codex")
        env_claude = claude.get("env", {})
        codex["argv"] = startup.insert_before_dashdash(
            codex["argv"], ["-c", 'openai_base_url="%s/v1"' % self.standin.url()])
        cold = {"name": "claude", "argv": startup.spawned_claude(claude["argv"]),
                "env": env_claude}
        fake = os.path.join(bindir, "fake-claude")
        with open(fake, "w") as f:
            f.write(FAKE)
        os.chmod(fake, 0o755)
        health = "[health]\nenabled = false\n"
        login = True
        if key == "cold":
            table, self.waits_for = [cold], None
        elif key == "claude":
            table, self.waits_for = [dict(claude, prestart=1)], "claude"
        elif key == "codex":
            table = [dict(claude, prestart=1), dict(codex, prestart=1)]
            self.waits_for, login = "codex", False
            health = ("[health]\nenabled = true\nbackoff_start_seconds = 86400\n"
                      "backoff_max_seconds = 86400\n")
        elif key == "codex-cold":
            table, self.waits_for = [dict(codex, prestart=0)], None
        elif key == "fake":
            table = [{"name": "claude", "prestart": 1, "argv": [
                fake, "--input-format", "stream-json", "--output-format", "stream-json"]}]
            self.waits_for = "claude"
        else:
            raise SystemExit("unknown variant %r" % key)
        config = os.path.join(self.root, "config.toml")
        with open(config, "w") as f:
            f.write("workers = 1\n%s[cache]\nttl_seconds = 0\n" % health)
            for r in table:
                f.write("[[runners.default]]\n")
                for k in ("name", "argv", "prestart", "env"):
                    if r.get(k) not in (None, {}):
                        f.write("%s = %s\n" % (k, toml_value(r[k])))
        env = {
            "HOME": home, "TMPDIR": tmp, "XDG_CONFIG_HOME": os.path.join(home, ".config"),
            "PATH": "%s:/usr/local/bin:/usr/bin:/bin" % bindir, "CODEX_API_KEY": "dummy",
            "BENCH_FINAL_LOG": self.final_log, "BENCH_LINGER": str(args.linger),
        }
        if login:
            env.update(ANTHROPIC_BASE_URL=self.standin.url(), ANTHROPIC_API_KEY="dummy")
        self.start(args.bin, config, env)
        self.counted = 0
        self.warm = False

    def copies_started(self, log):
        return sum(1 for line in log.splitlines() if "runner pre-started" in line
                   and ("runner=%s " % self.waits_for) in line + " ")

    def copies_taken(self, log):
        return sum(1 for line in log.splitlines() if "runner start " in line
                   and "prestarted=true" in line
                   and ("runner=%s " % self.waits_for) in line + " ")

    def wait_ready(self, deadline=120):
        """Until the daemon is up and, where it pre-starts, a copy of the runner this
        variant's jobs take is waiting (started, and not taken by a job)."""
        self.wait_log(lambda log: "daemon start" in log and (
            self.waits_for is None or not self.warm
            or self.copies_started(log) > self.copies_taken(log)), deadline)

    def judge(self, n):
        """Publishes job n; returns its figures (seconds)."""
        self.wait_ready()
        stem = "j%d" % n
        publish, verdict = stage_job(self.state, stem, "bench-%s" % self.key, n)
        before = len(self.model_requests())
        finals_before = len(self.finals())
        t0 = time.monotonic()
        publish()
        t_verdict, v = read_hit(verdict, t0, 120, 0.0005, self.fail)
        self.warm = True
        out = {"to_verdict": t_verdict - t0, "runner": v.get("runner"),
               "attempts": len(v.get("attempts", []))}
        reqs = self.model_requests()[before:]
        if self.key != "fake":
            if not reqs:
                raise SystemExit("%s: no model request for %s" % (self.key, stem))
            out["to_request"] = reqs[-1]["t"] - t0
            start = [wall_of(line) for line in self.log().splitlines()
                     if ("runner start id=%s " % stem) in line]
            if start and start[-1] is not None:
                out["start_to_request"] = reqs[-1]["t"] + self.wall_offset - start[-1]
        finals = self.finals()[finals_before:]
        if finals:
            out["final_to_verdict"] = t_verdict - finals[-1]
        return out

    def finals(self):
        try:
            with open(self.final_log) as f:
                return [float(x) for x in f.read().split()]
        except OSError:
            return []

    def model_requests(self):
        return [r for r in self.standin.snapshot() if r["kind"] == "model"]


def pct(xs, q):
    xs = sorted(xs)
    return xs[max(0, min(len(xs) - 1, int(round(q * len(xs) + 0.5)) - 1))]


LABELS = {
    "cold": "cold: claude spawned with its job (baseline)",
    "claude": "claude pre-started (shipped)",
    "codex": "codex pre-started (claude benched)",
    "codex-cold": "codex spawned with its job",
    "fake": "fake stream-json claude, pre-started, lingers after its result",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=12, help="counted jobs per variant (12)")
    ap.add_argument("--only", nargs="+", choices=list(LABELS), default=list(LABELS))
    ap.add_argument("--bin", default=BIN, help="the llm-judge binary (target/release)")
    ap.add_argument("--bin-dir", default=startup.BIN_DIR)
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds between jobs, so no start-up overlaps a job (1.0)")
    ap.add_argument("--linger", type=float, default=0.5,
                    help="seconds the fake runs on after its result event (0.5)")
    ap.add_argument("--out", help="also write the report here")
    ap.add_argument("--json", help="write every job's figures here")
    args = ap.parse_args()
    report = []

    def say(line=""):
        print(line, flush=True)
        report.append(line)

    def version(cli):
        home = tempfile.mkdtemp(prefix="llm-judge-prestart-v-")
        try:
            return subprocess.run([os.path.join(args.bin_dir, cli), "--version"],
                                  capture_output=True, text=True, timeout=30,
                                  env={"HOME": home, "PATH": "/usr/bin:/bin"}).stdout.strip()
        finally:
            shutil.rmtree(home, ignore_errors=True)

    say("bench/prestart.py, %s, %d CPUs, %s, %s, %s, binary %s, load %s" % (
        time.strftime("%Y-%m-%d %H:%M"), os.cpu_count(), platform.release(),
        version("claude"), version("codex"), args.bin,
        open("/proc/loadavg").read().split()[:3]))
    daemons = [Daemon(k, args) for k in args.only]
    figures = {d.key: [] for d in daemons}
    try:
        for d in daemons:
            d.judge(0)  # warm-up
            time.sleep(args.settle)
        for n in range(1, args.jobs + 1):
            for d in daemons:
                figures[d.key].append(d.judge(n))
                time.sleep(args.settle)
    finally:
        for d in daemons:
            d.stop()
    say("%d counted jobs per variant, interleaved, one at a time, %.1f s apart; load at end %s"
        % (args.jobs, args.settle, open("/proc/loadavg").read().split()[:3]))
    say()
    metrics = [("to_request", "publish to request"), ("start_to_request", "start to request"),
               ("to_verdict", "publish to verdict"), ("final_to_verdict", "final event to verdict")]
    base = {m: pct([f[m] for f in figures["cold"] if m in f], 0.5)
            for m, _ in metrics if "cold" in figures and any(m in f for f in figures["cold"])}
    say("| variant | runner (attempts) | " + " | ".join(
        "%s, median (p90) | ratio" % label for _, label in metrics) + " |")
    say("|---|---|" + "---|---|" * len(metrics))
    for key, figs in figures.items():
        cells = []
        for m, _ in metrics:
            xs = [f[m] for f in figs if m in f]
            if not xs:
                cells += ["", ""]
                continue
            med = pct(xs, 0.5)
            cells.append("%.1f ms (%.1f)" % (1000 * med, 1000 * pct(xs, 0.9)))
            cells.append("%.2f" % (med / base[m]) if base.get(m) else "")
        runners = sorted({"%s (%d)" % (f["runner"], f["attempts"]) for f in figs})
        say("| %s | %s | %s |" % (LABELS[key], ", ".join(runners), " | ".join(cells)))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(report) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
