#!/usr/bin/env python3
"""Runner start-up latency (issue 33 item 4): how long a real CLI takes to reach the model.

    flock /work/cargo.lock python3 bench/startup.py                  # every variant, 10 runs
    flock /work/cargo.lock python3 bench/startup.py --runs 5 --only a b
    python3 bench/startup.py --runs 10 --out bench/results/X.txt --json bench/results/X.json

The real `claude` and `codex` (target/real-runners/node_modules/.bin, or --bin-dir) are run
against a stand-in model API that this script serves on 127.0.0.1 in its own threads (a port
of tests/real_runners/standin.rs: Anthropic Messages API with streaming SSE for claude,
OpenAI Responses API streaming for codex, HTTP 426 to codex's WebSocket attempt, `{}` to
anything else). Every request's arrival is recorded by the same monotonic clock as the spawn.

Metric, per run:
  to request  spawn (or, for a pre-started variant, the write of the prompt to its stdin)
              until the stand-in has read the first model request (POST /v1/messages or
              POST /v1/responses; headers and body read)
  to exit     the same start until the process has exited (a blocking waitpid)
Variants (argv from config/llm-judge.toml, the shipped default tables; codex's two
placeholders filled as the judge fills them, `JudgeFiles`; the claude variants run
without the table's `env`, which d measures):
  a  claude spawned with its job: the shipped argv without its stream-json flags, with
     --output-format json and the prompt as the last argv item (the baseline; what the
     daemon shipped before `prestart`, and what `prestart = 0` would start per job if its
     argv held the prompt)
  b  claude pre-started, the shipped argv (--input-format stream-json --output-format
     stream-json --verbose), the prompt written as one stream-json user message after
     --delay s, then stdin closed
  c  claude pre-started with the prompt on plain stdin (no prompt item: `-p` reads stdin),
     written after --delay s, then stdin closed
  d  a + CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1
  e  codex, shipped default argv (+ -c openai_base_url=<stand-in> before `--`) (codex baseline)
  f  e + -c check_for_update_on_startup=false -c analytics.enabled=false
Each run gets its own fresh temp root (HOME, TMPDIR, cwd, all 0700, empty), an environment
of only HOME, PATH, XDG_CONFIG_HOME, TMPDIR, the stand-in's URL and dummy keys (as
tests/real_runners/lane.rs), its own process group (killed afterwards), and its own
stand-in. Runs of the variants are interleaved (a b c d e f, a b c ...) so that a change in
machine load hits every variant alike. Reported: median and p90 (nearest rank) of each
metric, the ratio of the medians to the baseline of the same session (a for claude, e for
codex), requests the stand-in saw before the model request, and, for pre-started variants,
requests and files created or changed under the run's HOME, TMPDIR and cwd before the
prompt was written.

Census (--census N runs per variant, not timed, default 2): the same runs with
HTTP(S)_PROXY pointing at the stand-in (NO_PROXY=127.0.0.1,localhost), so that each
attempt to reach any other host shows up as a CONNECT (or absolute-URI request), answered
502. This counts the "non-essential traffic" that, on this offline machine, otherwise dies
at the DNS lookup unseen.

Only Python's standard library is used. Nothing here is a test: it asserts nothing.
"""

import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "config", "llm-judge.toml")
BIN_DIR = os.path.join(ROOT, "target", "real-runners", "node_modules", ".bin")
PROMPT = 'Is the sky blue? Reply with {"ok": true} or {"ok": false}.'
ANSWER = '{"ok": true, "reason": "startup bench"}'
CLAUDE_QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
}
CODEX_QUIET = ["-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false"]


# ---------------------------------------------------------------------------------------
# The stand-in model API.


def sse(event, data):
    return "event: %s\ndata: %s\n\n" % (event, json.dumps(data, separators=(",", ":")))


def claude_events(model, text):
    return [
        sse("message_start", {"type": "message_start", "message": {
            "id": "msg_bench", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        sse("content_block_start", {"type": "content_block_start", "index": 0,
                                    "content_block": {"type": "text", "text": ""}}),
        sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                    "delta": {"type": "text_delta", "text": text}}),
        sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        sse("message_delta", {"type": "message_delta",
                              "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                              "usage": {"output_tokens": 5}}),
        sse("message_stop", {"type": "message_stop"}),
    ]


def codex_events(text):
    evs = [
        {"type": "response.created", "response": {"id": "resp_bench"}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "message", "role": "assistant", "id": "msg_bench", "content": [],
                  "status": "in_progress"}},
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
         "item_id": "msg_bench", "delta": text},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {"type": "message", "role": "assistant", "id": "msg_bench",
                  "status": "completed",
                  "content": [{"type": "output_text", "text": text, "annotations": []}]}},
        {"type": "response.completed", "response": {"id": "resp_bench", "usage": {
            "input_tokens": 10, "input_tokens_details": None, "output_tokens": 5,
            "output_tokens_details": None, "total_tokens": 15}}},
    ]
    return [sse(e["type"], e) for e in evs]


class StandIn:
    """A threaded HTTP/1.1 server on 127.0.0.1 (one request per connection, as
    standin.rs). Also serves as the census's proxy: CONNECT and absolute-URI requests to
    other hosts are recorded and answered 502."""

    def __init__(self, text=ANSWER):
        self.text = text
        self.requests = []
        self.lock = threading.Lock()
        standin = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                standin._serve(self.rfile, self.wfile, self.connection)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 64

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def snapshot(self):
        with self.lock:
            return list(self.requests)

    def _serve(self, rfile, wfile, conn):
        conn.settimeout(30)
        try:
            line = rfile.readline(65536)
            t_line = time.monotonic()
            while line in (b"\r\n", b"\n"):
                line = rfile.readline(65536)
                t_line = time.monotonic()
            if not line:
                return
            parts = line.decode("latin-1").split()
            if len(parts) < 2:
                return
            method, target = parts[0], parts[1]
            headers = {}
            while True:
                h = rfile.readline(65536)
                if h in (b"\r\n", b"\n", b""):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            body = b""
            if "chunked" in headers.get("transfer-encoding", "").lower():
                while True:
                    size = int(rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        rfile.readline()
                        break
                    body += rfile.read(size)
                    rfile.readline()
            elif headers.get("content-length"):
                body = rfile.read(int(headers["content-length"]))
            t_done = time.monotonic()
        except (OSError, ValueError):
            return
        host = headers.get("host", "")
        via_proxy = False
        if target.startswith("http://") or target.startswith("https://"):
            via_proxy = True
            rest = target.split("://", 1)[1]
            host, _, path = rest.partition("/")
            target = "/" + path
        own = host in ("127.0.0.1:%d" % self.port, "localhost:%d" % self.port)
        if method == "CONNECT":
            kind, host = "proxy", target
        elif via_proxy and not own:
            kind = "proxy"
        elif headers.get("upgrade"):
            kind = "websocket"
        elif method == "POST" and ((target.startswith("/v1/messages")
                                    and "count_tokens" not in target)
                                   or target.startswith("/v1/responses")):
            kind = "model"
        else:
            kind = "other"
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        rec = {"t_line": t_line, "t": t_done, "method": method, "path": target,
               "host": host, "kind": kind, "bytes": len(body),
               "user_agent": headers.get("user-agent", ""), "body": body}
        with self.lock:
            self.requests.append(rec)
        try:
            if kind == "proxy":
                self._respond(wfile, "502 Bad Gateway", "text/plain", b"")
            elif kind == "websocket":
                # codex tries a WebSocket first; 426 makes it switch to HTTP POST at once.
                self._respond(wfile, "426 Upgrade Required", "text/plain", b"")
            elif kind == "other":
                self._respond(wfile, "200 OK", "application/json", b"{}")
            elif target.startswith("/v1/messages"):
                model = (parsed or {}).get("model", "claude-haiku")
                if isinstance(parsed, dict) and parsed.get("stream") is False:
                    msg = {"id": "msg_bench", "type": "message", "role": "assistant",
                           "model": model, "content": [{"type": "text", "text": self.text}],
                           "stop_reason": "end_turn", "stop_sequence": None,
                           "usage": {"input_tokens": 10, "output_tokens": 5}}
                    self._respond(wfile, "200 OK", "application/json",
                                  json.dumps(msg).encode())
                else:
                    self._stream(wfile, claude_events(model, self.text))
            else:
                self._stream(wfile, codex_events(self.text))
        except OSError:
            pass

    @staticmethod
    def _respond(wfile, status, ctype, body):
        wfile.write(("HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n"
                     "connection: close\r\n\r\n" % (status, ctype, len(body))).encode())
        wfile.write(body)
        wfile.flush()

    @staticmethod
    def _stream(wfile, events):
        wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"cache-control: no-cache\r\nconnection: close\r\n\r\n")
        for e in events:
            wfile.write(e.encode())
            wfile.flush()


# ---------------------------------------------------------------------------------------
# Variants.


def shipped(name):
    with open(CONFIG, "rb") as f:
        cfg = tomllib.load(f)
    for r in cfg["runners"]["default"]:
        if r["name"] == name:
            return list(r["argv"])
    raise SystemExit("no default runner %r in %s" % (name, CONFIG))


SLIM_SRC = os.path.join(ROOT, "src", "core", "codex_slim.rs")
INSTRUCTIONS_ITEM = "model_instructions_file={instructions}"
CATALOG_ITEM = "model_catalog_json={codex_catalog}"


def judge_instructions(mode):
    """The judge's codex instructions for a table, read from the Rust source."""
    src = open(SLIM_SRC).read()
    const = "DEFAULT_INSTRUCTIONS" if mode == "default" else "INVESTIGATE_INSTRUCTIONS"
    m = re.search(r"pub const %s: &str = \"(.*?)\";" % const, src, re.S)
    text = re.sub(r"\\\n\s*", "", m.group(1))
    return text.replace("\\n", "\n").replace('\\"', '"')


class JudgeFiles:
    """The files a codex argv's placeholders name, made as the judge makes them (once
    per session, in a temp folder): its instructions per table, and `codex debug
    models` with the four tool-adding fields emptied (src/core/codex_slim.rs)."""

    def __init__(self, bin_dir):
        self.dir = tempfile.mkdtemp(prefix="llm-judge-files-")
        self.instructions = {}
        for mode in ("default", "investigate"):
            path = os.path.join(self.dir, "instructions-%s.md" % mode)
            with open(path, "w") as f:
                f.write(judge_instructions(mode))
            self.instructions[mode] = path
        home = os.path.join(self.dir, "home")
        os.makedirs(home)
        out = subprocess.run([os.path.join(bin_dir, "codex"), "debug", "models"],
                             env={"HOME": home, "PATH": "/usr/local/bin:/usr/bin:/bin"},
                             capture_output=True, timeout=60).stdout
        catalog = json.loads(out)
        for m in catalog["models"]:
            for k in ("tool_mode", "multi_agent_version", "apply_patch_tool_type"):
                m[k] = None
            m["experimental_supported_tools"] = []
        self.catalog = os.path.join(self.dir, "catalog.json")
        with open(self.catalog, "w") as f:
            json.dump(catalog, f)

    def fill(self, argv, mode="default"):
        out = []
        for a in argv:
            if a == INSTRUCTIONS_ITEM:
                out.append('model_instructions_file="%s"' % self.instructions[mode])
            elif a == CATALOG_ITEM:
                out.append('model_catalog_json="%s"' % self.catalog)
            else:
                out.append(a)
        return out


def without_prompt_slot(argv):
    """The plain stdin form (docs/reference.md, "Runners"): drop the `{prompt}` item and the `--` right before it."""
    i = argv.index("{prompt}")
    assert argv[i - 1] == "--", argv
    return argv[: i - 1] + argv[i + 1:]


def insert_before_dashdash(argv, extra):
    i = argv.index("--")
    return argv[:i] + extra + argv[i:]


class Variant:
    def __init__(self, key, cli, label, argv, prestart=None, env=None, base=None):
        self.key, self.cli, self.label = key, cli, label
        self.argv = argv          # may hold "{prompt}" and "{standin}"
        self.prestart = prestart  # None, "stream-json" or "stdin"
        self.env = env or {}
        self.base = base          # key of the baseline this is compared with

    def concrete(self, port, prompt):
        url = "http://127.0.0.1:%d" % port
        return [a.replace("{standin}", url) if a != "{prompt}" else prompt for a in self.argv]


def spawned_claude(shipped_claude):
    """The claude argv started with its job, prompt in argv (the shipped one before
    `prestart`): the shipped argv without its stream-json flags, with
    `--output-format json` and `-- {prompt}`."""
    argv = list(shipped_claude)
    for flag, n in (("--input-format", 2), ("--output-format", 2), ("--verbose", 1)):
        if flag in argv:
            i = argv.index(flag)
            del argv[i:i + n]
    return argv[:2] + ["--output-format", "json"] + argv[2:] + ["--", "{prompt}"]


def variants():
    prestarted = shipped("claude")
    claude = spawned_claude(prestarted)
    codex = insert_before_dashdash(shipped("codex"),
                                   ["-c", 'openai_base_url="{standin}/v1"'])
    return [
        Variant("a", "claude", "claude, spawned with its job (prompt in argv)", claude,
                base="a"),
        Variant("b", "claude", "claude pre-started, stream-json stdin (shipped argv)",
                prestarted, prestart="stream-json", base="a"),
        Variant("c", "claude", "claude pre-started, plain stdin",
                without_prompt_slot(claude), prestart="stdin", base="a"),
        Variant("d", "claude", "a + no non-essential traffic env", claude,
                env=CLAUDE_QUIET_ENV, base="a"),
        Variant("e", "codex", "codex, shipped default argv", codex, base="e"),
        Variant("f", "codex", "e + update check and analytics off",
                insert_before_dashdash(codex, CODEX_QUIET), base="e"),
    ]


# ---------------------------------------------------------------------------------------
# One run.


def tree(dirs):
    """{path: (size, mtime_ns)} of everything under dirs (dirs themselves excluded)."""
    out = {}
    for d in dirs:
        for base, subdirs, files in os.walk(d):
            for n in subdirs + files:
                p = os.path.join(base, n)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                out[p] = (st.st_size, st.st_mtime_ns)
    return out


def drain(pipe, sink):
    try:
        for chunk in iter(lambda: pipe.read(65536), b""):
            sink.append(chunk)
    except (OSError, ValueError):
        pass


def kill_group(pgid):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        time.sleep(0.2)


_JUDGE_FILES = []


def judge_files(bin_dir):
    """The session's JudgeFiles, made at first use."""
    if not _JUDGE_FILES:
        _JUDGE_FILES.append(JudgeFiles(bin_dir))
    return _JUDGE_FILES[0]


def run_once(v, args, census=False):
    standin = StandIn()
    root = tempfile.mkdtemp(prefix="llm-judge-startup-")
    home, tmp, cwd, bindir = (os.path.join(root, n) for n in ("home", "tmp", "work", "bin"))
    for d in (home, tmp, cwd, bindir):
        os.makedirs(d, mode=0o700)
    os.symlink(os.path.realpath(os.path.join(args.bin_dir, v.cli)), os.path.join(bindir, v.cli))
    env = {
        "HOME": home,
        "PATH": "%s:/usr/local/bin:/usr/bin:/bin" % bindir,
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "TMPDIR": tmp,
        "ANTHROPIC_BASE_URL": standin.url(),
        "ANTHROPIC_API_KEY": "dummy",
        "CODEX_API_KEY": "dummy",
    }
    env.update(v.env)
    if census:
        for k in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
            env[k] = standin.url()
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    argv = v.concrete(standin.port, PROMPT)
    if v.cli == "codex":
        argv = judge_files(args.bin_dir).fill(argv)
    argv[0] = os.path.join(bindir, v.cli)
    if v.prestart == "stream-json":
        payload = json.dumps({"type": "user", "message": {"role": "user", "content": PROMPT}})
        payload = (payload + "\n").encode()
    else:
        payload = PROMPT.encode()
    out, err = [], []
    t_spawn = time.monotonic()
    p = subprocess.Popen(argv, cwd=cwd, env=env,
                         stdin=subprocess.PIPE if v.prestart else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    readers = [threading.Thread(target=drain, args=(p.stdout, out), daemon=True),
               threading.Thread(target=drain, args=(p.stderr, err), daemon=True)]
    for r in readers:
        r.start()
    timed_out = []

    def watchdog():
        timed_out.append(True)
        kill_group(p.pid)

    dog = threading.Timer(args.timeout + (args.delay if v.prestart else 0), watchdog)
    dog.daemon = True
    dog.start()
    before_files, before_reqs, exited_early = {}, [], False
    t0 = t_spawn
    if v.prestart:
        # Sleep until the delay is up, unless the process ends first.
        deadline = t_spawn + args.delay
        while time.monotonic() < deadline and p.poll() is None:
            time.sleep(min(0.01, max(0.0, deadline - time.monotonic())))
        before_files = tree([home, tmp, cwd])
        before_reqs = standin.snapshot()
        exited_early = p.poll() is not None
        t0 = time.monotonic()
        try:
            p.stdin.write(payload)
            p.stdin.close()
        except (BrokenPipeError, OSError):
            pass
    rc = p.wait()
    t_exit = time.monotonic()
    dog.cancel()
    kill_group(p.pid)
    for r in readers:
        r.join(5)
    after_files = tree([home, tmp, cwd])
    reqs = standin.snapshot()
    standin.close()
    shutil.rmtree(root, ignore_errors=True)
    model = [r for r in reqs if r["kind"] == "model"]
    first = model[0]["t"] if model else None
    stdout = b"".join(out).decode("utf-8", "replace")
    res = {
        "variant": v.key,
        "rc": rc,
        "timed_out": bool(timed_out),
        # stream-json output carries the answer JSON-escaped inside its events.
        "answered": rc == 0 and (ANSWER in stdout or json.dumps(ANSWER)[1:-1] in stdout),
        "to_request": (first - t0) if first else None,
        "to_exit": t_exit - t0,
        "spawn_to_write": (t0 - t_spawn) if v.prestart else None,
        "spawn_to_exit": t_exit - t_spawn,
        "requests_before_model": [(r["kind"], r["method"], r["host"] if r["kind"] == "proxy"
                                   else r["path"]) for r in reqs
                                  if first is None or r["t"] < first],
        "requests_total": len(reqs),
        "model_requests": len(model),
        "files_after": len(after_files),
        "stdout_tail": stdout[-300:],
        "stderr_tail": b"".join(err).decode("utf-8", "replace")[-300:],
    }
    if v.prestart:
        res["exited_before_prompt"] = exited_early
        res["requests_before_prompt"] = [(r["kind"], r["method"], r["host"] if r["kind"] ==
                                          "proxy" else r["path"], round(r["t"] - t_spawn, 3))
                                         for r in before_reqs]
        res["files_before_prompt"] = sorted(os.path.relpath(p_, root) for p_ in before_files)
    if census:
        res["proxy"] = [(r["method"], r["host"], round(r["t"] - t_spawn, 3),
                         "before prompt" if v.prestart and r["t"] < t0 else "")
                        for r in reqs if r["kind"] == "proxy"]
    return res


# ---------------------------------------------------------------------------------------
# Report.


def pct(xs, q):
    """Nearest-rank percentile."""
    xs = sorted(xs)
    k = max(0, min(len(xs) - 1, int(-(-q * len(xs) // 100)) - 1))
    return xs[k]


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def summarize(vs, results):
    rows = {}
    for v in vs:
        rs = [r for r in results if r["variant"] == v.key]
        ok = [r for r in rs if r["to_request"] is not None]
        row = {"variant": v.key, "label": v.label, "runs": len(rs),
               "answered": sum(r["answered"] for r in rs)}
        if ok:
            req = [r["to_request"] * 1000 for r in ok]
            ex = [r["to_exit"] * 1000 for r in ok]
            row.update(req_median=statistics.median(req), req_p90=pct(req, 90),
                       exit_median=statistics.median(ex), exit_p90=pct(ex, 90),
                       req_min=min(req), req_max=max(req))
        # codex names -c keys it does not know: "session-flags: `KEY` is ignored."
        row["ignored_keys"] = sorted(set(re.findall(r"`([^`]+)` is ignored",
                                                    " ".join(r["stderr_tail"] for r in rs))))
        extra = [len(r["requests_before_model"]) for r in rs]
        row["extra_requests"] = sorted(set(extra))
        row["extra_kinds"] = sorted({"%s %s %s" % x for r in rs
                                     for x in r["requests_before_model"]})
        if v.prestart:
            row["requests_before_prompt"] = max(len(r["requests_before_prompt"]) for r in rs)
            # pids, hashes and timestamps in names differ per run: fold them.
            row["files_before_prompt"] = sorted({re.sub(r"[0-9a-f]{32,}|\d{3,}", "*", f)
                                                 for r in rs
                                                 for f in r["files_before_prompt"]})
            row["exited_before_prompt"] = sum(r["exited_before_prompt"] for r in rs)
        rows[v.key] = row
    for v in vs:
        row, base = rows[v.key], rows.get(v.base)
        if base and "req_median" in row and "req_median" in base:
            row["req_ratio"] = row["req_median"] / base["req_median"]
            row["exit_ratio"] = row["exit_median"] / base["exit_median"]
    return rows


def fmt_table(vs, rows):
    lines = ["| variant | runs (answered) | to request median | p90 | ratio | to exit median |"
             " p90 | ratio | requests before the model request |",
             "|---|---|---|---|---|---|---|---|---|"]
    for v in vs:
        r = rows[v.key]
        if "req_median" not in r:
            lines.append("| %s %s | %d (%d) | no model request | | | | | | %s |"
                         % (v.key, v.label, r["runs"], r["answered"], r["extra_requests"]))
            continue
        lines.append("| %s %s | %d (%d) | %.0f ms | %.0f ms | %.2f | %.0f ms | %.0f ms | %.2f | %s |"
                     % (v.key, v.label, r["runs"], r["answered"], r["req_median"], r["req_p90"],
                        r.get("req_ratio", float("nan")), r["exit_median"], r["exit_p90"],
                        r.get("exit_ratio", float("nan")),
                        "/".join(str(x) for x in r["extra_requests"])))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="timed runs per variant (10)")
    ap.add_argument("--census", type=int, default=2,
                    help="untimed runs per variant through the recording proxy (2)")
    ap.add_argument("--delay", type=float, default=3.0,
                    help="seconds a pre-started runner waits for its prompt (3)")
    ap.add_argument("--timeout", type=float, default=60.0, help="per run, seconds (60)")
    ap.add_argument("--only", nargs="+", default=None, help="variant keys, e.g. a b")
    ap.add_argument("--bin-dir", default=BIN_DIR)
    ap.add_argument("--out", help="also write the report here")
    ap.add_argument("--json", help="write every run's record here")
    ap.add_argument("--append", action="store_true", help="append to --out/--json files")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each run")
    args = ap.parse_args()
    vs = [v for v in variants() if args.only is None or v.key in args.only]
    report = []

    def say(s=""):
        print(s, flush=True)
        report.append(s)

    def version(cli):
        home = tempfile.mkdtemp(prefix="llm-judge-startup-v-")
        try:
            return subprocess.run([os.path.join(args.bin_dir, cli), "--version"],
                                  capture_output=True, text=True, timeout=30,
                                  env={"HOME": home, "PATH": "/usr/local/bin:/usr/bin:/bin"}
                                  ).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            return "? (%s)" % e
        finally:
            shutil.rmtree(home, ignore_errors=True)

    started = time.time()
    say("## bench/startup.py, %s" % time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    say("host: %s, %d CPUs, %s, Python %s" % (platform.node(), os.cpu_count(),
                                              platform.release(), platform.python_version()))
    say("claude: %s; codex: %s" % (version("claude"), version("codex")))
    say("runs per variant: %d, census runs: %d, pre-start delay: %.1f s, interleaved"
        % (args.runs, args.census, args.delay))
    say("load average at start: %s" % loadavg())
    for v in vs:
        say("argv %s: %s%s" % (v.key, json.dumps(v.argv),
                               " env " + json.dumps(v.env) if v.env else ""))
    results, census = [], []
    for i in range(args.runs):
        for v in vs:
            r = run_once(v, args)
            r["round"] = i
            results.append(r)
            if args.verbose:
                print("  run %d %s: rc %s, to request %s, to exit %.3f, before model %s%s" % (
                    i, v.key, r["rc"],
                    "%.3f" % r["to_request"] if r["to_request"] else None, r["to_exit"],
                    r["requests_before_model"],
                    ", before prompt: %s req, %d files" % (len(r["requests_before_prompt"]),
                                                           len(r["files_before_prompt"]))
                    if v.prestart else ""), flush=True)
    for i in range(args.census):
        for v in vs:
            r = run_once(v, args, census=True)
            census.append(r)
            if args.verbose:
                print("  census %d %s: rc %s, proxy %s" % (i, v.key, r["rc"], r["proxy"]),
                      flush=True)
    rows = summarize(vs, results)
    say("load average at end: %s (%.0f s)" % (loadavg(), time.time() - started))
    say()
    for line in fmt_table(vs, rows):
        say(line)
    say()
    say("Requests the stand-in saw before the first model request (kind method path):")
    for v in vs:
        say("  %s: %s" % (v.key, "; ".join(rows[v.key]["extra_kinds"]) or "none"))
    for v in vs:
        if rows[v.key]["ignored_keys"]:
            say("  %s: codex ignored unknown -c keys: %s" % (v.key, rows[v.key]["ignored_keys"]))
    say("Pre-started variants, before the prompt was written:")
    for v in vs:
        if v.prestart:
            r = rows[v.key]
            say("  %s: exited before the prompt in %d runs; at most %d requests; files under "
                "HOME/TMPDIR/cwd: %s" % (v.key, r["exited_before_prompt"],
                                         r["requests_before_prompt"],
                                         ", ".join(r["files_before_prompt"]) or "none"))
    failed = [r for r in results if not r["answered"]]
    if failed:
        say("Runs without the stand-in's answer on stdout with exit 0:")
        for r in failed:
            say("  %s round %d: rc %s%s, stdout %r, stderr %r" % (
                r["variant"], r["round"], r["rc"], " (timed out)" if r["timed_out"] else "",
                r["stdout_tail"][-160:], r["stderr_tail"][-160:]))
    if census:
        say("Census (HTTP(S)_PROXY = the stand-in, %d runs per variant): attempts to other "
            "hosts (method host, s after spawn)" % args.census)
        for v in vs:
            seen = [r for r in census if r["variant"] == v.key]
            hosts = {}
            for r in seen:
                for m, h, t, when in r["proxy"]:
                    hosts.setdefault(h, []).append("%.2f%s" % (t, " before prompt" if when else ""))
            say("  %s: %s; model request reached: %s" % (
                v.key, "; ".join("%s at %s" % (h, ", ".join(ts)) for h, ts in
                                 sorted(hosts.items())) or "none",
                "/".join(str(r["model_requests"]) for r in seen)))
    mode = "a" if args.append else "w"
    if args.out:
        with open(args.out, mode) as f:
            f.write("\n".join(report) + "\n\n")
    if args.json:
        blob = {"started": started, "argv": {v.key: v.argv for v in vs},
                "env": {v.key: v.env for v in vs}, "summary": rows, "runs": results,
                "census": census, "report": report}
        if args.append and os.path.exists(args.json):
            with open(args.json) as f:
                old = json.load(f)
            sessions = old if isinstance(old, list) else [old]
        else:
            sessions = []
        sessions.append(blob)
        with open(args.json, "w") as f:
            json.dump(sessions, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
