#!/usr/bin/env python3
"""What a hook costs the agent's turn (issue 48): `llm-judge hook claude` timed from its
spawn to its exit, as Claude Code waits for it.

    python3 bench/hooks.py                      # 200 calls per variant, release build
    python3 bench/hooks.py --calls 50 --no-build --out bench/results/X.txt

Builds the release binary (unless --no-build). Each variant runs the hook with a real
claude 2.1.328 Stop or UserPromptSubmit stdin shape (tests/fixtures/hooks/), against a
daemon of its own (state folder, HOME, rules, stand-in model API on 127.0.0.1 that
answers at once, one worker, fsync on, cache and runner health off):
  true       /bin/true, spawned and reaped the same way (the floor of any hook)
  version    `llm-judge --version` (the binary's own start and exit)
  notice     a Stop with one notice rule, daemon running: the job is queued, the hook
             returns at once (goal: p95 under 20 ms)
  deliver    a UserPromptSubmit whose session has one hit verdict waiting: the notice
             is drained and printed (goal: p95 under 20 ms)
  block-api  a Stop with one block rule judged by an `anthropic` API runner: the hook
             returns with the block (goal: under 30 ms)
  block-claude  the same with the shipped default claude, pre-started (`prestart = 1`,
             the real CLI from target/real-runners), --settle s between calls so the
             replacing copy has started
Calls are interleaved across variants (true, version, notice, ...); each uses a fresh
session or turn so no answer is cached or reused. Reported: median, p95 and max (nearest
rank) in ms, and each median's ratio to `true`'s. Only Python's standard library is
used; nothing here is a test.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import api_runner  # noqa: E402  (the API daemon and its stand-in)
import prestart  # noqa: E402  (the pre-started claude daemon, pct)
import startup  # noqa: E402

ROOT = startup.ROOT
BIN = prestart.BIN
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "hooks")


def rules(action):
    return ('[[rule]]\nname = "r"\naction = "%s"\nwait_ms = 30000\n'
            'question = "Is it ok? Reply {\\"ok\\": true|false}"\n'
            'hit_if_all_true = ["ok"]\nnotice = "The judge says ok."\n' % action)


class Target:
    """A daemon of bench/api_runner.py or bench/prestart.py, its rules and hook env."""

    def __init__(self, daemon, config, home, action):
        self.daemon, self.config, self.home = daemon, config, home
        xdg = os.path.join(home, ".config")
        os.makedirs(os.path.join(xdg, "llm-judge"), exist_ok=True)
        with open(os.path.join(xdg, "llm-judge", "rules.toml"), "w") as f:
            f.write(rules(action))
        self.env = {"HOME": home, "XDG_CONFIG_HOME": xdg, "PATH": "/usr/bin:/bin",
                    "TMPDIR": os.path.join(os.path.dirname(home), "tmp")}
        self.argv = [BIN, "--state-dir", daemon.state, "--config", config, "hook", "claude"]

    def call(self, stdin):
        """(seconds from spawn to exit, stdout)."""
        t0 = time.monotonic()
        p = subprocess.run(self.argv, input=stdin, env=self.env, capture_output=True)
        return time.monotonic() - t0, p.stdout


def fixture(name, **keys):
    with open(os.path.join(FIXTURES, name)) as f:
        v = json.load(f)
    v.update(keys)
    return json.dumps(v).encode()


def stop(session, n):
    return fixture("claude-2.1.328.Stop.json", session_id=session, prompt_id="p%d" % n,
                   last_assistant_message="Reply %d: all tests pass." % n)


def prompt(session):
    return fixture("claude-2.1.328.UserPromptSubmit.json", session_id=session, prompt="next")


def wait_verdict(state, session, deadline=60):
    """Until the session's verdict folder holds a verdict."""
    import hashlib
    folder = os.path.join(state, "verdicts",
                          hashlib.sha1(("claude:" + session).encode()).hexdigest()[:16])
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            if any(n.endswith(".json") and not n.startswith(".") for n in os.listdir(folder)):
                return
        except OSError:
            pass
        time.sleep(0.002)
    raise SystemExit("no verdict for %s within %d s" % (session, deadline))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=200, help="calls per variant (200)")
    ap.add_argument("--claude-calls", type=int, default=20, help="block-claude calls (20)")
    ap.add_argument("--settle", type=float, default=1.0, help="s between block-claude calls")
    ap.add_argument("--bin-dir", default=startup.BIN_DIR)
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--no-claude", action="store_true", help="skip block-claude")
    ap.add_argument("--out")
    args = ap.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    report = []

    def say(line=""):
        print(line, flush=True)
        report.append(line)

    say("bench/hooks.py, %s, %d CPUs, %s, load %s" % (
        time.strftime("%Y-%m-%d %H:%M"), os.cpu_count(), platform.release(),
        open("/proc/loadavg").read().split()[:3]))
    api_notice = api_runner.ApiDaemon("notice")
    api_block = api_runner.ApiDaemon("block")
    daemons = [api_notice, api_block]
    targets = {}
    try:
        for key, d, action in (("notice", api_notice, "notice"), ("block-api", api_block, "block")):
            d.wait_ready()
            targets[key] = Target(d, os.path.join(d.root, "config.toml"),
                                  os.path.join(d.root, "home"), action)
        times = {k: [] for k in ("true", "version", "notice", "deliver", "block-api")}
        blocked = 0
        for n in range(args.calls + 1):
            t0 = time.monotonic()
            subprocess.run(["/bin/true"], env=targets["notice"].env)
            t_true = time.monotonic() - t0
            t0 = time.monotonic()
            subprocess.run([BIN, "--version"], env=targets["notice"].env, capture_output=True)
            t_version = time.monotonic() - t0
            session = "bench-%d" % n
            t_notice, _ = targets["notice"].call(stop(session, n))
            wait_verdict(api_notice.state, session)
            t_deliver, out = targets["notice"].call(prompt(session))
            if b"The judge says ok." not in out:
                raise SystemExit("no notice delivered: %r" % out)
            t_block, out = targets["block-api"].call(stop(session, n))
            blocked += b'"decision":"block"' in out
            if n == 0:
                continue  # warm-up
            for k, t in (("true", t_true), ("version", t_version), ("notice", t_notice),
                         ("deliver", t_deliver), ("block-api", t_block)):
                times[k].append(t)
        say("%d calls per variant after one warm-up, interleaved; block-api blocked %d of %d" % (
            args.calls, blocked, args.calls + 1))
        if not args.no_claude:
            pargs = argparse.Namespace(bin_dir=args.bin_dir, bin=BIN, linger=0.5)
            cli = prestart.Daemon("claude", pargs)
            daemons.append(cli)
            target = Target(cli, os.path.join(cli.root, "config.toml"),
                            os.path.join(cli.root, "home"), "block")
            times["block-claude"] = []
            for n in range(args.claude_calls + 1):
                cli.wait_ready()
                t, out = target.call(stop("claude-%d" % n, n))
                if b'"decision":"block"' not in out:
                    raise SystemExit("block-claude did not block: %r\n%s" % (out, cli.log()[-3000:]))
                if n:
                    times["block-claude"].append(t)
                time.sleep(args.settle)
            cli.warm = True
    finally:
        for d in daemons:
            d.stop()
    base = prestart.pct(times["true"], 0.5)
    say("| variant | median ms | p95 ms | max ms | median / true |")
    say("|---|---|---|---|---|")
    for k, xs in times.items():
        say("| %s | %.2f | %.2f | %.2f | %.1f |" % (
            k, 1000 * prestart.pct(xs, 0.5), 1000 * prestart.pct(xs, 0.95), 1000 * max(xs),
            prestart.pct(xs, 0.5) / base))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
