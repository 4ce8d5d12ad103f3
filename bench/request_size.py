#!/usr/bin/env python3
"""What one verdict sends (issue 42 items 1 and 3): request bytes of the real codex and
claude against a stand-in model API, and what each slim key or runner variable changes.

    python3 bench/request_size.py                      # codex keys and claude env, 3 runs
    python3 bench/request_size.py --only claude --runs 10 --strace
    python3 bench/request_size.py --json bench/results/X.json | tee bench/results/X.txt

The CLIs are target/real-runners/node_modules/.bin (the lane's pinned ones, or
--bin-dir); the stand-in is bench/startup.py's (it records every request, answers the
model at once, 426 to codex's WebSocket try, 502 to a proxy CONNECT). Every run gets a
fresh empty HOME, TMPDIR and cwd. The argv come from config/llm-judge.toml, with the two
placeholders filled as the judge fills them: the judge's instructions for the table
(src/core/codex_slim.rs) and `codex debug models` trimmed of `tool_mode`,
`experimental_supported_tools`, `multi_agent_version` and `apply_patch_tool_type`.

codex (default table, a one-line question; investigate table with a README in the cwd):
  pre-slim     the shipped argv without its slim keys (the tables before issue 42)
  +KEY         pre-slim plus one key: bytes saved by that key alone
  slim         the shipped argv, for the table's model (spark: fallback metadata) and
               catalog models (gpt-6.2-sol, gpt-5.6-luna, gpt-5.5 via -m)
claude (default table, cold spawn, prompt on stdin as stream-json):
  none | nonessential | max-output | shipped (both, the table's env)
  per variant: model request bytes and max_tokens, requests to the stand-in, and with
  --census attempts to other hosts (HTTP(S)_PROXY = the stand-in, NO_PROXY=127.0.0.1),
  with --strace DNS look-ups (connect() to port 53) and TCP connects, spawn to model
  request and spawn to exit (medians).

Only Python's standard library (and strace, if asked). Nothing here is a test.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import startup  # noqa: E402  (the stand-in, the shipped-table reader)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "config", "llm-judge.toml")
PROMPT = 'Does the reply retract an earlier claim? Reply {"ok": true|false}'


def table(mode, name):
    with open(CONFIG, "rb") as f:
        cfg = tomllib.load(f)
    for r in cfg["runners"][mode]:
        if r["name"] == name:
            return list(r["argv"]), dict(r.get("env", {}))
    raise SystemExit("no %s runner %r in %s" % (mode, name, CONFIG))


def slim_pairs(argv):
    """The slim keys of a shipped codex argv, as (flag, value) pairs."""
    pairs, i = [], 0
    while i < len(argv):
        flag, value = argv[i], argv[i + 1] if i + 1 < len(argv) else None
        if (flag == "-c" and value != "notify=[]") or flag == "--disable":
            pairs.append((flag, value))
            i += 2
        else:
            i += 1
    return pairs


def without_pairs(argv, pairs):
    out, i = [], 0
    while i < len(argv):
        if i + 1 < len(argv) and (argv[i], argv[i + 1]) in pairs:
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def with_pairs(argv, pairs):
    extra = [x for p in pairs for x in p]
    i = argv.index("--")
    return argv[:i] + extra + argv[i:]


def run(cli, argv, args, env=None, cwd_files=None, stdin=None, census=False, strace=False):
    """One run; the stand-in's requests and, with strace, the connects."""
    standin = startup.StandIn(text='{"ok": true}')
    root = tempfile.mkdtemp(prefix="llm-judge-reqsize-run-")
    home, tmp, cwd = (os.path.join(root, n) for n in ("home", "tmp", "work"))
    for d in (home, tmp, cwd):
        os.makedirs(d, mode=0o700)
    for name, text in (cwd_files or {}).items():
        open(os.path.join(cwd, name), "w").write(text)
    e = {"HOME": home, "PATH": "%s:/usr/local/bin:/usr/bin:/bin" % args.bin_dir,
         "XDG_CONFIG_HOME": os.path.join(home, ".config"), "TMPDIR": tmp,
         "ANTHROPIC_BASE_URL": standin.url(), "ANTHROPIC_API_KEY": "dummy",
         "CODEX_API_KEY": "dummy"}
    e.update(env or {})
    if census:
        for k in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
            e[k] = standin.url()
        e["NO_PROXY"] = e["no_proxy"] = "127.0.0.1,localhost"
    argv = [a.replace("{prompt}", PROMPT) for a in argv]
    if cli == "codex":
        argv = startup.insert_before_dashdash(
            argv, ["-c", 'openai_base_url="%s/v1"' % standin.url()])
    argv[0] = os.path.join(args.bin_dir, cli)
    trace = os.path.join(root, "strace.txt")
    if strace:
        argv = ["strace", "-f", "-qq", "-e", "trace=connect", "-o", trace] + argv
    t0 = time.monotonic()
    p = subprocess.run(argv, env=e, cwd=cwd, capture_output=True, timeout=args.timeout,
                       input=stdin.encode() if stdin else None,
                       stdin=None if stdin else subprocess.DEVNULL)
    t_exit = time.monotonic() - t0
    reqs = standin.snapshot()
    standin.close()
    connects = open(trace).read() if strace and os.path.exists(trace) else ""
    shutil.rmtree(root, ignore_errors=True)
    model = [r for r in reqs if r["kind"] == "model"]
    return {
        "rc": p.returncode,
        "bytes": model[0]["bytes"] if model else None,
        "model_requests": len(model),
        "max_tokens": json.loads(model[0]["body"]).get("max_tokens") if model else None,
        "requests": [(r["kind"], r["method"], r["host"] if r["kind"] == "proxy" else r["path"])
                     for r in reqs],
        "to_request": (model[0]["t"] - t0) if model else None,
        "to_exit": t_exit,
        "dns": len(re.findall(r"sin6?_port=htons\(53\)", connects)),
        "tcp": len(re.findall(r"connect\(\d+, \{sa_family=AF_INET6?, sin6?_port=htons\((?!53\))",
                              connects)),
    }


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def codex_section(args, files, say):
    rows = []
    for mode, question_files in (("default", None),
                                 ("investigate", {"README.md": "hello\n",
                                                  "AGENTS.md": "Always be verbose.\n" * 40})):
        argv, _ = table(mode, "codex")
        pairs = slim_pairs(argv)
        pre = without_pairs(argv, pairs)

        def size(a, label):
            runs = [run("codex", files.fill(a, mode), args, cwd_files=question_files)
                    for _ in range(args.runs)]
            b = median([r["bytes"] for r in runs])
            ok = all(r["rc"] == 0 and r["model_requests"] == 1 for r in runs)
            rows.append({"table": mode, "variant": label, "bytes": b, "ok": ok})
            return b

        base = size(pre, "pre-slim")
        say("codex %s, pre-slim argv: %s B" % (mode, base))
        if mode == "default":
            for pair in pairs:
                b = size(with_pairs(pre, [pair]), "+" + " ".join(pair))
                say("  + %-62s saves %6s B" % (" ".join(pair), base - b if b else "?"))
        b = size(argv, "slim")
        say("codex %s, slim (shipped) argv: %s B (%.3f of pre-slim)" % (mode, b, b / base))
        no_catalog = without_pairs(argv, [("-c", startup.CATALOG_ITEM)])
        collab = ("-c", "include_collaboration_mode_instructions=false")
        sol = list(argv)
        if "-m" in sol:
            sol[sol.index("-m") + 1] = "gpt-6.2-sol"
            no_catalog[no_catalog.index("-m") + 1] = "gpt-6.2-sol"
        b1 = size(no_catalog, "slim without the catalog, gpt-6.2-sol")
        b2 = size(without_pairs(sol, [collab]), "slim without %s, gpt-6.2-sol" % collab[1])
        say("  gpt-6.2-sol: slim without the trimmed catalog %s B, without %s %s B"
            % (b1, collab[1], b2))
        if mode == "default":
            for model in ("gpt-6.2-sol", "gpt-5.6-luna", "gpt-5.5"):
                a = list(argv)
                a[a.index("-m") + 1] = model
                b2 = size(a, "slim, -m " + model)
                p2 = list(pre)
                p2[p2.index("-m") + 1] = model
                b3 = size(p2, "pre-slim, -m " + model)
                say("  -m %-14s slim %6s B, pre-slim %6s B" % (model, b2, b3))
    return rows


def claude_section(args, say):
    argv, env = table("default", "claude")
    message = json.dumps({"type": "user", "message": {"role": "user", "content": PROMPT}})
    variants = [
        ("none", {}),
        ("nonessential", {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}),
        ("max-output", {"CLAUDE_CODE_MAX_OUTPUT_TOKENS": env.get(
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS", "1024")}),
        ("shipped", env),
    ]
    rows = []
    for label, extra in variants:
        runs = [run("claude", argv, args, env=extra, stdin=message + "\n")
                for _ in range(args.runs)]
        census = ([run("claude", argv, args, env=extra, stdin=message + "\n", census=True)
                   for _ in range(2)] if args.census else [])
        traced = ([run("claude", argv, args, env=extra, stdin=message + "\n", strace=True)
                   for _ in range(2)] if args.strace else [])
        row = {
            "variant": label, "env": extra,
            "ok": all(r["rc"] == 0 for r in runs),
            "bytes": median([r["bytes"] for r in runs]),
            "max_tokens": runs[0]["max_tokens"],
            "requests": runs[0]["requests"],
            "to_request_ms": round(1000 * median([r["to_request"] for r in runs])),
            "to_exit_ms": round(1000 * median([r["to_exit"] for r in runs])),
            "other_hosts": [r["requests"] for r in census],
            "dns": [r["dns"] for r in traced],
            "tcp": [r["tcp"] for r in traced],
        }
        rows.append(row)
        say("claude %-12s %s B, max_tokens %s, requests %s, to request %s ms, to exit %s ms%s%s"
            % (label, row["bytes"], row["max_tokens"],
               ["%s %s" % (m, p) for _, m, p in row["requests"]], row["to_request_ms"],
               row["to_exit_ms"],
               ", other hosts %s" % [[h for k, _, h in c if k == "proxy"]
                                     for c in row["other_hosts"]] if census else "",
               ", dns %s, tcp %s" % (row["dns"], row["tcp"]) if traced else ""))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=["codex", "claude"],
                    default=["codex", "claude"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--census", action="store_true", help="also count other hosts (proxy)")
    ap.add_argument("--strace", action="store_true", help="also count DNS and TCP connects")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--bin-dir", default=startup.BIN_DIR)
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args()

    def say(s=""):
        print(s, flush=True)

    say("request_size.py, %s, load %s" % (time.strftime("%Y-%m-%d %H:%M"), os.getloadavg()))
    for cli in ("claude", "codex"):
        v = subprocess.run([os.path.join(args.bin_dir, cli), "--version"],
                           capture_output=True, text=True, timeout=60).stdout.strip()
        say("%s: %s" % (cli, v))
    out = {}
    if "codex" in args.only:
        out["codex"] = codex_section(args, startup.JudgeFiles(args.bin_dir), say)
    if "claude" in args.only:
        out["claude"] = claude_section(args, say)
    if args.json:
        json.dump(out, open(args.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
