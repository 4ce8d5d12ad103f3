#!/usr/bin/env python3
"""What `llm-judge enqueue --wait` costs while it waits, and how soon it sees its verdict
(issue 38 item 2).

    flock /work/cargo.lock cargo build --release
    python3 bench/enqueue_wait.py                         # target/release/llm-judge
    python3 bench/enqueue_wait.py --before /tmp/old-llm-judge --tries 20 --seconds 5

Metrics:
  cpu, no daemon     one `enqueue --wait S` with no daemon and no verdict: (user + system
                     CPU time) / wall time of that process, from its own wait4 rusage, in %
  cpu, daemon        the same while a daemon holds the state folder and judges the job
                     with a runner that answers only after 60 s (so no verdict comes
                     within the wait)
  publish to seen    `enqueue --id X --wait 60` with no daemon; once it printed that it is
                     waiting (its watch is set up) and has idled a random 0.1-0.3 s, this
                     script publishes X's verdict as the judge does (temp file, rename) and
                     times from just after the rename until the verdict line arrives on
                     the pipe of enqueue's stdout; median and max over --tries
With --before BIN the same figures are taken for BIN in the same session, first, as the
baseline. Each run has its own fresh temp state folder. Nothing here is a test.
"""

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def env_for(state):
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")}
    env["HOME"] = os.path.join(state, "home")
    os.makedirs(env["HOME"], exist_ok=True)
    return env


def cpu_percent(bin_path, seconds, with_daemon):
    """CPU % of one `enqueue --wait seconds` that gets no verdict."""
    root = tempfile.mkdtemp(prefix="wait-bench-")
    state = os.path.join(root, "state")
    env = env_for(root)
    env["CATSTACK_LLM_JUDGE_RUNNERS"] = json.dumps([["slow", ["/bin/sh", "-c", "sleep 60; echo '{\"ok\": true}'"]]])
    base = [bin_path, "--state-dir", state, "--set", "shutdown_grace_seconds=0", "--set", "kill_grace_seconds=1"]
    daemon = None
    try:
        if with_daemon:
            daemon = subprocess.Popen(base + ["daemon"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for(lambda: os.path.exists(os.path.join(state, "status.json")), 30)
        started = time.monotonic()
        proc = subprocess.Popen(
            base + ["enqueue", "--transcript", "t", "--prompt", "q", "--timeout", "120", "--wait", str(seconds)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 124:
            sys.exit(f"enqueue --wait ended with {proc.returncode}, expected 124 (timed out)")
        return 100.0 * (usage.ru_utime + usage.ru_stime) / wall
    finally:
        if daemon is not None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        shutil.rmtree(root, ignore_errors=True)


def wait_for(cond, limit):
    end = time.monotonic() + limit
    while not cond():
        if time.monotonic() > end:
            sys.exit("timed out waiting for the daemon to start")
        time.sleep(0.02)


def transcript_folder(state):
    """The verdict folder of transcript "t": made by the first enqueue --wait."""
    folders = os.listdir(os.path.join(state, "verdicts"))
    assert len(folders) == 1, folders
    return os.path.join(state, "verdicts", folders[0])


def publish_to_seen(bin_path, tries):
    """Seconds from a verdict's rename into its folder to its line on enqueue's stdout."""
    root = tempfile.mkdtemp(prefix="wait-bench-")
    state = os.path.join(root, "state")
    env = env_for(root)
    out = []
    try:
        for n in range(tries):
            job = f"lat{n}"
            proc = subprocess.Popen(
                [bin_path, "--state-dir", state, "enqueue", "--id", job, "--transcript", "t",
                 "--prompt", "q", "--wait", "60"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            assert proc.stdout.readline().strip() == job
            # Printed once its watch is set up.
            while "waiting anyway" not in proc.stderr.readline():
                pass
            time.sleep(random.uniform(0.1, 0.3))
            folder = transcript_folder(state)
            temp = os.path.join(folder, f".{job}.tmp")
            with open(temp, "w") as f:
                json.dump({"id": job, "transcript": "t", "outcome": "clean"}, f)
            os.rename(temp, os.path.join(folder, f"{job}.json"))
            published = time.monotonic()
            line = proc.stdout.readline()
            seen = time.monotonic()
            assert json.loads(line)["id"] == job, line
            proc.wait(30)
            out.append(seen - published)
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure(label, bin_path, args):
    no_daemon = cpu_percent(bin_path, args.seconds, False)
    daemon = cpu_percent(bin_path, args.seconds, True)
    lat = publish_to_seen(bin_path, args.tries)
    ms = [x * 1000 for x in lat]
    print(f"{label:8} cpu no daemon {no_daemon:6.2f} %   cpu daemon {daemon:6.2f} %   "
          f"publish to seen median {statistics.median(ms):6.2f} ms  max {max(ms):6.2f} ms  "
          f"({len(ms)} tries)")
    return {"cpu_no_daemon": no_daemon, "cpu_daemon": daemon, "latency_ms": ms}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default="target/release/llm-judge")
    p.add_argument("--before", help="a baseline binary, measured first in the same session")
    p.add_argument("--seconds", type=float, default=5.0, help="length of each --wait (default 5)")
    p.add_argument("--tries", type=int, default=20, help="publish-to-seen tries (default 20)")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, --wait {args.seconds} s")
    figures = {}
    if args.before:
        figures["before"] = measure("before", os.path.abspath(args.before), args)
    figures["after"] = measure("after", os.path.abspath(args.bin), args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
