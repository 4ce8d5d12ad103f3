#!/usr/bin/env python3
"""What a stop costs when no daemon runs and two block rules hit: `llm-judge hook claude`
judges both in the hook, with a fake judge that takes 0.5 s. BIN_A and BIN_B run
interleaved, 11 counted runs each; median and max wall time, and the ratio B/A.

    python3 bench/hook_inline.py BIN_A BIN_B

Each run is a fresh session and state folder (nothing cached). Nothing here is a test.
"""
import json, os, shutil, subprocess, sys, tempfile, time, statistics, uuid

bins = {"A": sys.argv[1], "B": sys.argv[2]}
root = tempfile.mkdtemp(prefix="hookab-")
runner = os.path.join(root, "judge.sh")
open(runner, "w").write("#!/bin/sh\nsleep 0.5\necho '{\"a\": true, \"b\": true}'\n")
os.chmod(runner, 0o755)
# The rules where every version reads them, the runner in a config file (a hook takes
# no rules or runners from a variable).
os.makedirs(os.path.join(root, "xdg", "llm-judge"))
rules = os.path.join(root, "xdg", "llm-judge", "rules.toml")
config = os.path.join(root, "config.toml")
open(config, "w").write('[[runners.default]]\nname = "fake"\nargv = ["%s", "{prompt}"]\n' % runner)
open(rules, "w").write('''[[rule]]
name = "one"
action = "block"
question = "a? Reply {\\"a\\": bool}"
hit_if_all_true = ["a"]
notice = "A."
wait_ms = 20000
[[rule]]
name = "two"
action = "block"
question = "b? Reply {\\"b\\": bool}"
hit_if_all_true = ["b"]
notice = "B."
wait_ms = 20000
''')
fix = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "hooks", "claude-2.1.328.Stop.json")))
env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_JUDGE", "CATSTACK"))}
env.update(HOME=root, XDG_CONFIG_HOME=os.path.join(root, "xdg"))
times = {"A": [], "B": []}
for i in range(24):
    which = ["A", "B"][(i + i // 2) % 2]
    state = os.path.join(root, f"state-{i}")
    fix.update(session_id=str(uuid.uuid4()), prompt_id=str(uuid.uuid4()), cwd=root)
    t = time.perf_counter()
    out = subprocess.run([bins[which], "--state-dir", state, "--config", config, "hook", "claude"],
                         input=json.dumps(fix).encode(), env=env, capture_output=True, timeout=60)
    elapsed = time.perf_counter() - t
    assert b'"block"' in out.stdout and b"A." in out.stdout and b"B." in out.stdout, out
    if i >= 2:
        times[which].append(elapsed * 1000)
for k, v in times.items():
    print(f"{k}: median {statistics.median(v):.0f} ms, max {max(v):.0f} ms ({len(v)} runs)  {bins[k]}")
print(f"ratio B/A: {statistics.median(times['B']) / statistics.median(times['A']):.2f}")
shutil.rmtree(root, ignore_errors=True)
