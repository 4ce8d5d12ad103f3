#!/usr/bin/env python3
"""What an API runner adds to the model's own time, through the daemon, against the
pre-started claude (issue 41).

    python3 bench/api_runner.py                 # 20 jobs per variant
    python3 bench/api_runner.py --jobs 10 --no-build --out bench/results/X.txt

Builds the release binary (unless --no-build), then runs two daemons side by side, each
with its own state folder, HOME, TMPDIR and stand-in model API on 127.0.0.1 that answers
at once, one worker, the cache and runner health off, and a one-runner default table:
  cli  the shipped claude, `prestart = 1` (the real Claude Code from
       target/real-runners, bench/prestart.py's variant "claude"): the baseline
  api  an `anthropic` API runner on a kept-alive HTTP/1.1 connection to its stand-in
Jobs are interleaved (cli, api, cli, ...), one at a time, `--settle` seconds apart (so
the claude copy that replaces a taken one has started, as a user's next job finds it);
the first job of each daemon is a warm-up and is not counted. Metrics per job, from the rename that publishes it:
  to request   until the stand-in has read the model request
  to verdict   until the verdict file exists (polled every 0.2 ms)
  model        the stand-in's own time for the request (read to answer written; 0 for
               the CLI's stand-in, which answers at once and does not record it)
  added        to verdict minus model: what the judge adds to the model's time
Reported: medians and p90 (nearest rank), and the ratio of each median to the
baseline's. Only Python's standard library is used; nothing here is a test.
"""

import argparse
import http.server
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prestart  # noqa: E402  (the pre-started claude daemon, pct)
import startup  # noqa: E402  (the shipped argv)

ROOT = startup.ROOT
BIN = prestart.BIN
ANSWER = '{"ok": true, "reason": "api bench"}'


class KeepAliveStandIn:
    """A threaded HTTP/1.1 server on 127.0.0.1 that keeps connections alive and answers
    every POST with a Messages response at once, recording when it read each request
    and when it had written the answer."""

    def __init__(self):
        self.requests = []
        self.lock = threading.Lock()
        self.connections = 0
        standin = self
        body = json.dumps({
            "id": "msg_bench", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": ANSWER}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 60, "output_tokens": 8}}).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                # Headers and body go out in two writes: without this, Nagle holds the
                # body until the client's delayed ACK (40 ms) on a busy connection.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with standin.lock:
                    standin.connections += 1

            def do_POST(self):
                t_in = time.monotonic()
                self.rfile.read(int(self.headers.get("content-length", "0")))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                t_out = time.monotonic()
                with standin.lock:
                    standin.requests.append({"t": t_in, "t_out": t_out})

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def snapshot(self):
        with self.lock:
            return list(self.requests)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class ApiDaemon(prestart.BenchDaemon):
    """One llm-judge daemon whose default table is one API runner."""

    def __init__(self, key):
        self.key = key
        self.standin = KeepAliveStandIn()
        self.root = tempfile.mkdtemp(prefix="llm-judge-api-%s-" % key)
        home, tmp = (os.path.join(self.root, n) for n in ("home", "tmp"))
        self.state = os.path.join(self.root, "state")
        for d in (home, tmp, self.state, os.path.join(self.state, "jobs")):
            os.makedirs(d, mode=0o700)
        config = os.path.join(self.root, "config.toml")
        with open(config, "w") as f:
            f.write("workers = 1\n[health]\nenabled = false\n[cache]\nttl_seconds = 0\n"
                    "[[runners.default]]\nname = \"api\"\napi = \"anthropic\"\n"
                    "model = \"claude-haiku-4-5\"\nbase_url = \"http://127.0.0.1:%d/v1\"\n"
                    "api_key_env = \"BENCH_KEY\"\n" % self.standin.port)
        env = {"HOME": home, "TMPDIR": tmp, "XDG_CONFIG_HOME": os.path.join(home, ".config"),
               "PATH": "/usr/local/bin:/usr/bin:/bin", "BENCH_KEY": "dummy"}
        self.start(BIN, config, env)
        self.jobs = 0

    def wait_ready(self, deadline=60):
        self.wait_log(lambda log: "daemon start" in log, deadline)

    def judge(self, n):
        """Publishes job n; returns (to request, to verdict, model) in seconds."""
        self.wait_ready()
        stem = "j%d" % n
        publish, verdict = prestart.stage_job(self.state, stem, "bench-%s" % self.key, n)
        before = len(self.standin.snapshot())
        t0 = time.monotonic()
        publish()
        t_verdict, _ = prestart.read_hit(verdict, t0, 60, 0.0002, self.fail)
        t_verdict -= t0
        self.jobs += 1
        reqs = self.standin.snapshot()[before:]
        if not reqs:
            raise SystemExit("%s: no model request for %s" % (self.key, stem))
        return reqs[0]["t"] - t0, t_verdict, reqs[0]["t_out"] - reqs[0]["t"]

class CliDaemon(prestart.Daemon):
    """bench/prestart.py's pre-started claude (its variant "claude"); the model time is
    the stand-in's."""

    def __init__(self, args):
        super().__init__("claude", args)
        self.key = "cli"

    def judge(self, n):
        figures = super().judge(n)
        # Its stand-in answers at once and does not record when it finished writing:
        # counted as 0, so all of the CLI's time is "added" (it streams a few events).
        return figures["to_request"], figures["to_verdict"], 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=20, help="counted jobs per variant (20)")
    ap.add_argument("--bin-dir", default=startup.BIN_DIR)
    ap.add_argument("--no-build", action="store_true", help="use target/release as it is")
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds between jobs, so the claude copy that replaces a taken "
                         "one is ready, as in bench/prestart.py (1.0)")
    ap.add_argument("--out", help="also write the report here")
    args = ap.parse_args()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    report = []

    def say(line=""):
        print(line, flush=True)
        report.append(line)

    version = subprocess.run([os.path.join(args.bin_dir, "claude"), "--version"],
                             capture_output=True, text=True).stdout.strip()
    say("bench/api_runner.py, %s, %d CPUs, %s, claude %s, load %s" % (
        time.strftime("%Y-%m-%d %H:%M"), os.cpu_count(), platform.release(), version,
        open("/proc/loadavg").read().split()[:3]))
    # What bench/prestart.py's daemon reads of its own options.
    args.bin, args.linger = prestart.BIN, 0.5
    daemons = [CliDaemon(args), ApiDaemon("api")]
    figures = {d.key: [] for d in daemons}
    try:
        for d in daemons:
            d.judge(0)  # warm-up
            time.sleep(args.settle)
        for n in range(1, args.jobs + 1):
            for d in daemons:
                figures[d.key].append(d.judge(n))
                time.sleep(args.settle)
        connections = daemons[1].standin.connections
    finally:
        for d in daemons:
            d.stop()
    say("%d counted jobs per variant, interleaved, one at a time, %.1f s apart; load at end "
        "%s; the API stand-in saw %d connection(s) for %d requests" % (
            args.jobs, args.settle, open("/proc/loadavg").read().split()[:3], connections,
            args.jobs + 1))
    say()
    say("| variant | to request, median | p90 | to verdict, median | p90 | model | "
        "added, median | p90 | added, ratio to cli |")
    say("|---|---|---|---|---|---|---|---|---|")
    labels = {"cli": "cli: pre-started claude (baseline)", "api": "api: anthropic API runner"}
    pct = prestart.pct
    added = {k: [v - m for _, v, m in figs] for k, figs in figures.items()}
    base = pct(added["cli"], 0.5)
    for k in ("cli", "api"):
        figs = figures[k]
        req = [r for r, _, _ in figs]
        ver = [v for _, v, _ in figs]
        model = [m for _, _, m in figs]
        say("| %s | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.2f ms | %.1f ms | %.1f ms | %.3f |"
            % (labels[k], 1000 * pct(req, 0.5), 1000 * pct(req, 0.9), 1000 * pct(ver, 0.5),
               1000 * pct(ver, 0.9), 1000 * pct(model, 0.5), 1000 * pct(added[k], 0.5),
               1000 * pct(added[k], 0.9), pct(added[k], 0.5) / base))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
