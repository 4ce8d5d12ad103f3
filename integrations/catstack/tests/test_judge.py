#!/usr/bin/env python3
"""Tests of the catstack drop-in (integrations/catstack/judge.py; docs/reference.md, "The catstack drop-in").

Run: LLM_JUDGE_BIN=target/debug/llm-judge python3 -m unittest discover -s integrations/catstack/tests -v
Each test has its own temp HOME and state folder; every process it starts is reaped;
every wait polls a condition against a deadline.
"""
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
DROP_IN = os.path.join(os.path.dirname(HERE), "judge.py")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BIN = os.path.abspath(os.environ.get("LLM_JUDGE_BIN") or os.path.join(REPO, "target", "debug", "llm-judge"))
DEADLINE = 60.0


def load_judge(name="judge_under_test", path=DROP_IN):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


judge = load_judge()

FINDING_PY = ("from collections import namedtuple\n"
              "Finding = namedtuple('Finding', 'rule_id subject message evidence')\n")


def catstack_tree(root, events_py, link=False):
    """A catstack-shaped tree under `root`: engine/hooks/_sdk with `finding.py` and
    `events_py` as `events.py`, and the drop-in as engine/hooks/llm-judge/judge.py
    (a symlink, as catstack installs it, or a copy). Returns that judge.py's path."""
    hooks = os.path.join(root, "engine", "hooks")
    os.makedirs(os.path.join(hooks, "_sdk"))
    os.makedirs(os.path.join(hooks, "llm-judge"))
    judge_py = os.path.join(hooks, "llm-judge", "judge.py")
    if link:
        os.symlink(DROP_IN, judge_py)
    else:
        shutil.copy(DROP_IN, judge_py)
    for name, text in (("finding.py", FINDING_PY), ("events.py", events_py)):
        with open(os.path.join(hooks, "_sdk", name), "w", encoding="utf-8") as handle:
            handle.write(text)
    return judge_py


def wait_until(what, condition, deadline=DEADLINE):
    end = time.monotonic() + deadline
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= end:
            raise AssertionError(f"timed out after {deadline}s waiting for {what}")
        time.sleep(0.02)


def setUpModule():
    if not (os.path.isfile(BIN) and os.access(BIN, os.X_OK)):
        raise RuntimeError(f"llm-judge binary {BIN} not found: run cargo build or set LLM_JUDGE_BIN")


class DropInCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="dropin-")
        self.home = os.path.join(self.tmp, "home")
        self.state = os.path.join(self.tmp, "state")
        os.makedirs(self.home)
        self.count = os.path.join(self.tmp, "count")
        self.runner = os.path.join(self.tmp, "fake-runner")
        # Written before anything is spawned (no "Text file busy").
        with open(self.runner, "w", encoding="utf-8") as handle:
            handle.write('#!/bin/sh\nprintf \'%s\\n\' "$1" >> "$COUNT_FILE"\necho \'{"match": true}\'\n')
        os.chmod(self.runner, 0o755)
        env = {
            "HOME": self.home,
            "XDG_CONFIG_HOME": os.path.join(self.home, ".config"),
            judge.STATE_ENV: self.state,
            judge.RUNNERS_ENV: json.dumps([["fake", [self.runner, "{prompt}"]]]),
            judge.BIN_ENV: BIN,
            "COUNT_FILE": self.count,
        }
        self.env = mock.patch.dict(os.environ, env)
        self.env.start()
        for name in (judge.CHILD_ENV, "LLM_JUDGE_CONFIG"):
            os.environ.pop(name, None)
        self.procs = []
        # "Says so once" is per process: each test starts afresh.
        judge._said_no_daemon = False

    def tearDown(self):
        for proc in self.procs:
            self.stop(proc)
        for proc in list(judge._spawned):
            try:
                proc.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        judge._spawned.clear()
        self.env.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stop(self, proc):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def start_daemon(self):
        proc = subprocess.Popen(
            [BIN, "daemon", "--state-dir", self.state, "--workers", "2"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.procs.append(proc)
        wait_until("the daemon's lock", lambda: judge.daemon_running(self.state) or proc.poll() is not None)
        self.assertIsNone(proc.poll(), "the daemon exited at start")
        return proc

    def judged(self):
        try:
            with open(self.count, encoding="utf-8") as handle:
                return [line.rstrip("\n") for line in handle]
        except FileNotFoundError:
            return []

    def settled(self):
        jobs = os.path.join(self.state, "jobs")
        claims = os.path.join(self.state, "claims")
        left = [n for n in os.listdir(jobs) if not n.startswith(".")] if os.path.isdir(jobs) else []
        held = os.listdir(claims) if os.path.isdir(claims) else []
        return not left and not held

    def job(self, marker, transcript="T", **extra):
        job = {"id": marker, "hook": "demo", "transcript": transcript,
               "prompt": f"judge {marker}", "hit_if_all_true": ["match"], "on_hit": "flagged"}
        job.update(extra)
        return job


class TestNames(DropInCase):
    def test_every_spec_12_name_is_there(self):
        for name in ("enqueue", "drain", "ask", "main", "state_root", "log", "verdict_dir",
                     "write_json_atomic", "build_prompt", "is_subagent_transcript", "is_subagent_job",
                     "is_subagent_payload", "subagent_flags"):
            self.assertTrue(callable(getattr(judge, name)), name)
        self.assertEqual(judge.STATE_ENV, "CATSTACK_LLM_JUDGE_STATE_DIR")
        self.assertEqual(judge.RUNNERS_ENV, "CATSTACK_LLM_JUDGE_RUNNERS")
        self.assertEqual(judge.CHILD_ENV, "CATSTACK_LLM_JUDGE_CHILD")
        self.assertEqual(judge.PROMPT_SLOT, "{prompt}")
        self.assertEqual(judge.TIMEOUT_SECONDS, 60)
        self.assertEqual(judge.PROMPT_FIELD_CHAR_CAP, judge.PROMPT_FIELD_CAP)

    def test_state_root_is_the_variable_else_home_cache(self):
        self.assertEqual(judge.state_root(), self.state)
        os.environ[judge.STATE_ENV] = ""
        self.assertEqual(judge.state_root(), os.path.join(self.home, ".cache", "catstack-llm-judge"))

    def test_verdict_dir_is_the_sha1_prefix_of_the_transcript(self):
        digest = hashlib.sha1("T".encode()).hexdigest()[:16]
        self.assertEqual(judge.verdict_dir("T"), os.path.join(self.state, "verdicts", digest))
        self.assertTrue(judge.verdict_dir("").endswith("da39a3ee5e6b4b0d"))

    def test_write_json_atomic_leaves_no_temp_file(self):
        path = os.path.join(self.state, "x", "a.json")
        judge.write_json_atomic(path, {"a": 1})
        with open(path, encoding="utf-8") as handle:
            self.assertEqual(json.load(handle), {"a": 1})
        self.assertEqual(os.listdir(os.path.dirname(path)), ["a.json"])

    def test_log_appends_one_line_per_call(self):
        judge.log("first\nline")
        judge.log("second")
        with open(os.path.join(self.state, "judge.log"), encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        self.assertEqual(len(lines), 2)
        self.assertTrue(lines[0].endswith("first\\nline"), lines[0])

    def test_build_prompt_caps_each_field_keeping_the_end(self):
        prompt = judge.build_prompt("rule", "a" * 5000 + "END", "human")
        self.assertIn("Last assistant reply:\n" + "a" * (judge.PROMPT_FIELD_CAP - 3) + "END\n", prompt)
        self.assertTrue(prompt.startswith("Return exactly one line of JSON"))
        self.assertTrue(prompt.endswith("Last human message:\nhuman"))


class TestSubagents(DropInCase):
    def write(self, name, first_line):
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(first_line + "\n{}\n")
        return path

    def test_subagent_rule(self):
        self.assertTrue(judge.is_subagent_transcript("/s/subagents/agent-1.jsonl"))
        self.assertTrue(judge.is_subagent_transcript("C:\\s\\subagents\\a.jsonl"))
        self.assertFalse(judge.is_subagent_transcript("/s/subagents-old/a.jsonl"))
        self.assertTrue(judge.is_subagent_transcript(self.write("side.jsonl", '{"isSidechain": true}')))
        self.assertTrue(judge.is_subagent_transcript(self.write("agent.jsonl", '{"agent_id": "a1"}')))
        self.assertFalse(judge.is_subagent_transcript(self.write("main.jsonl", '{"isSidechain": false, "agent_id": ""}')))
        self.assertFalse(judge.is_subagent_transcript(os.path.join(self.tmp, "missing.jsonl")))
        self.assertFalse(judge.is_subagent_transcript(None))
        for key in ("agent_id", "isSidechain", "is_sidechain"):
            self.assertTrue(judge.is_subagent_job({key: "x", "transcript": "T"}), key)
        self.assertFalse(judge.is_subagent_job({"agent_id": "", "transcript": "T"}))

    def test_subagent_flags_and_payload(self):
        self.assertEqual(judge.subagent_flags({"agent_id": "a", "isSidechain": False, "x": 1}), {"agent_id": "a"})
        self.assertEqual(judge.subagent_flags({"transcript_path": "/t"}), {})
        self.assertEqual(judge.subagent_flags("not a dict"), {})
        self.assertTrue(judge.is_subagent_payload({"agent_id": "a"}))
        self.assertTrue(judge.is_subagent_payload({"agent_transcript_path": "/s/subagents/a.jsonl"}))
        self.assertTrue(judge.is_subagent_payload({"transcript_path": self.write("s.jsonl", '{"isSidechain": true}')}))
        self.assertFalse(judge.is_subagent_payload({"transcript_path": "/s/main.jsonl"}))
        self.assertFalse(judge.is_subagent_payload(None))


class TestEnqueue(DropInCase):
    def test_inside_a_runner_it_writes_nothing(self):
        os.environ[judge.CHILD_ENV] = "1"
        self.assertIsNone(judge.enqueue(self.job("child")))
        self.assertFalse(os.path.exists(self.state))

    def test_a_subagent_job_is_not_queued(self):
        self.assertIsNone(judge.enqueue(self.job("sub", agent_id="a1")))
        self.assertIsNone(judge.enqueue(self.job("sub2", transcript="/x/subagents/a.jsonl")))
        self.assertFalse(os.path.exists(os.path.join(self.state, "jobs")))

    def test_an_id_that_is_not_a_plain_file_name_is_a_value_error(self):
        for bad in ("../x", "a/b", ".hidden", "a\0b"):
            with self.assertRaises(ValueError, msg=bad):
                judge.enqueue(self.job(bad))

    def test_an_id_still_queued_is_a_value_error_and_the_first_job_stays(self):
        os.environ[judge.BIN_ENV] = ""  # no binary, no daemon: the first job stays queued
        os.environ["PATH"] = os.path.join(self.tmp, "empty")
        err = os.path.join(self.tmp, "stderr")
        with open(err, "w+", encoding="utf-8") as handle, mock.patch.object(sys, "stderr", handle):
            self.assertEqual(judge.enqueue(self.job("twice")), "twice")
            with self.assertRaises(ValueError) as raised:
                judge.enqueue(self.job("twice", prompt="the second"))
        self.assertIn("still queued", str(raised.exception))
        path = os.path.join(self.state, "jobs", "twice.json")
        with open(path, encoding="utf-8") as handle:
            self.assertEqual(json.load(handle)["prompt"], "judge twice")
        self.assertEqual([n for n in os.listdir(os.path.dirname(path)) if n != "twice.json"], [],
                         "no temp file left behind")
        os.unlink(path)  # judged: the id is free again
        self.assertEqual(judge.enqueue(self.job("twice", prompt="again")), "twice")

    def test_catstacks_own_keys_pass_through_silently(self):
        self.start_daemon()
        extra = {"harness": "claude", "session_id": "s1", "created_at": 1.5, "offscope_request": "r"}
        err = os.path.join(self.tmp, "stderr")
        with open(err, "w+", encoding="utf-8") as handle, mock.patch.object(sys, "stderr", handle):
            self.assertEqual(judge.enqueue(self.job("extra", **extra)), "extra")
            got = wait_until("the verdict", lambda: judge.drain("T"))
            handle.seek(0)
            self.assertEqual(handle.read(), "")
        self.assertEqual([(v["id"], v["outcome"]) for v in got], [("extra", "hit")])
        with open(os.path.join(self.state, "judge.log"), encoding="utf-8") as handle:
            log = handle.read()
        for key in extra:
            self.assertNotIn(key, log)

    def test_with_a_daemon_it_only_publishes_and_the_daemon_judges(self):
        self.start_daemon()
        job_id = judge.enqueue(self.job("with-daemon"))
        self.assertEqual(job_id, "with-daemon")
        self.assertEqual(judge._spawned, [], "no run was started beside the daemon")
        got = wait_until("the verdict", lambda: judge.drain("T"))
        self.assertEqual([v["id"] for v in got], ["with-daemon"])
        self.assertEqual(got[0]["outcome"], "hit")

    def test_without_a_daemon_it_starts_run_and_says_so_once(self):
        err = os.path.join(self.tmp, "stderr")
        with open(err, "w+", encoding="utf-8") as handle, mock.patch.object(sys, "stderr", handle):
            judge.enqueue(self.job("alone-1"))
            judge.enqueue(self.job("alone-2"))
            handle.seek(0)
            said = handle.read()
        self.assertEqual(said.count("no daemon holds the lock"), 1, said)
        got = []
        wait_until("two verdicts", lambda: got.extend(judge.drain("T")) or len(got) == 2)
        self.assertEqual(sorted(v["id"] for v in got), ["alone-1", "alone-2"])
        wait_until("runs finish", self.settled)
        self.assertEqual(sorted(self.judged()), ["judge alone-1", "judge alone-2"])

    def test_without_a_daemon_or_a_binary_the_job_stays_queued_and_stderr_says_where_it_looked(self):
        os.environ[judge.BIN_ENV] = ""
        os.environ["PATH"] = os.path.join(self.tmp, "empty")
        err = os.path.join(self.tmp, "stderr")
        with open(err, "w+", encoding="utf-8") as handle, mock.patch.object(sys, "stderr", handle):
            self.assertEqual(judge.enqueue(self.job("nobin")), "nobin")
            handle.seek(0)
            said = handle.read()
        self.assertIn("llm-judge not found", said)
        self.assertIn(".cargo/bin", said)
        self.assertTrue(os.path.exists(os.path.join(self.state, "jobs", "nobin.json")))
        self.assertEqual(judge._spawned, [])

    def test_a_random_id_when_none_is_given(self):
        self.start_daemon()
        job = self.job("x")
        del job["id"]
        job_id = judge.enqueue(job)
        self.assertRegex(job_id, r"^[0-9a-f]{32}$")

    def test_no_transcript_warns_on_stderr(self):
        self.start_daemon()
        err = os.path.join(self.tmp, "stderr")
        with open(err, "w+", encoding="utf-8") as handle, mock.patch.object(sys, "stderr", handle):
            judge.enqueue({"id": "nt", "prompt": "judge nt"})
            handle.seek(0)
            self.assertIn("no transcript", handle.read())

    def test_enqueue_latency(self):
        alone = []
        for n in range(10):
            started = time.perf_counter()
            judge.enqueue(self.job(f"alone-lat-{n}", transcript="L"))
            alone.append((time.perf_counter() - started) * 1000)
        print(f"\n[latency] drop-in enqueue with no daemon (starts llm-judge run): median "
              f"{statistics.median(alone):.2f} ms, max {max(alone):.2f} ms", file=sys.stderr)
        wait_until("the runs", lambda: self.settled() and len(self.judged()) == 10)
        self.start_daemon()
        times = []
        for n in range(50):
            started = time.perf_counter()
            judge.enqueue(self.job(f"lat-{n}", transcript="L"))
            times.append((time.perf_counter() - started) * 1000)
        median = statistics.median(times)
        print(f"\n[latency] drop-in enqueue with a daemon running: median {median:.2f} ms, "
              f"max {max(times):.2f} ms over {len(times)}", file=sys.stderr)
        wait_until("all judged", lambda: self.settled() and len(self.judged()) == 60)

    def test_enqueue_never_waits_on_the_runner(self):
        # A runner that answers only once the gate exists (bounded: it gives up after 60 s).
        gate = os.path.join(self.tmp, "gate")
        with open(self.runner, "w", encoding="utf-8") as handle:
            handle.write('#!/bin/sh\nn=0\nwhile [ ! -e "$GATE" ] && [ $n -lt 6000 ]; do sleep 0.01; n=$((n+1)); done\n'
                         'printf \'%s\\n\' "$1" >> "$COUNT_FILE"\necho \'{"match": true}\'\n')
        os.environ["GATE"] = gate
        judge.enqueue(self.job("alone-gated", transcript="G"))   # no daemon: starts `llm-judge run`
        self.start_daemon()
        judge.enqueue(self.job("daemon-gated", transcript="G"))
        # Both returned while their runners were still blocked on the gate.
        self.assertEqual(self.judged(), [])
        with open(gate, "w", encoding="utf-8"):
            pass
        wait_until("both judged", lambda: self.settled() and len(self.judged()) == 2)


class TestDrain(DropInCase):
    def test_oldest_first_and_removed(self):
        folder = judge.verdict_dir("T")
        for name, age in (("newer", 10), ("older", 20)):
            path = os.path.join(folder, f"{name}.json")
            judge.write_json_atomic(path, {"id": name, "outcome": "clean"})
            os.utime(path, (time.time() - age, time.time() - age))
        judge.write_json_atomic(os.path.join(judge.verdict_dir("U"), "other.json"), {"id": "other"})
        self.assertEqual([v["id"] for v in judge.drain("T")], ["older", "newer"])
        self.assertEqual(os.listdir(folder), [])
        self.assertEqual(judge.drain("T"), [])
        self.assertEqual(judge.drain("never"), [])

    def test_unreadable_verdict_is_an_unchecked_stand_in(self):
        folder = judge.verdict_dir("T")
        os.makedirs(folder)
        with open(os.path.join(folder, "bad.json"), "w", encoding="utf-8") as handle:
            handle.write("{half")
        got = judge.drain("T")
        self.assertEqual(got[0]["id"], "bad")
        self.assertEqual(got[0]["transcript"], "T")
        self.assertEqual(got[0]["outcome"], "unchecked")
        self.assertTrue(got[0]["reason"].startswith("unreadable verdict file"))

    def test_a_dead_drains_claim_goes_back(self):
        folder = judge.verdict_dir("T")
        judge.write_json_atomic(os.path.join(folder, ".lost.json.999999999.drain"), {"id": "lost"})
        self.assertEqual([v["id"] for v in judge.drain("T")], ["lost"])

    def test_a_symlinked_folder_is_refused(self):
        target = os.path.join(self.tmp, "elsewhere")
        judge.write_json_atomic(os.path.join(target, "a.json"), {"id": "a"})
        os.makedirs(os.path.join(self.state, "verdicts"))
        os.symlink(target, judge.verdict_dir("T"))
        self.assertEqual(judge.drain("T"), [])
        self.assertTrue(os.path.exists(os.path.join(target, "a.json")))

    def test_beside_llm_judge_drain_no_verdict_twice(self):
        folder = judge.verdict_dir("T")
        for n in range(200):
            judge.write_json_atomic(os.path.join(folder, f"v{n}.json"), {"id": f"v{n}"})
        rust = subprocess.Popen([BIN, "drain", "--state-dir", self.state, "--transcript", "T"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        ours = []
        while rust.poll() is None:
            ours.extend(v["id"] for v in judge.drain("T"))
        out, _ = rust.communicate(timeout=DEADLINE)
        ours.extend(v["id"] for v in judge.drain("T"))
        theirs = [json.loads(line)["id"] for line in out.splitlines()]
        self.assertEqual(sorted(ours + theirs), sorted(f"v{n}" for n in range(200)))


class TestAskAndRun(DropInCase):
    def test_ask_answered(self):
        result = judge.ask("judge ask-1", timeout_seconds=10)
        self.assertEqual(result["outcome"], "answered")
        self.assertEqual(result["runner"], "fake")
        self.assertEqual(result["answer"], {"match": True})
        self.assertEqual(set(result), {"outcome", "runner", "answer", "attempts"})
        self.assertEqual(self.judged(), ["judge ask-1"])

    def test_ask_unchecked(self):
        os.environ[judge.RUNNERS_ENV] = json.dumps([["ghost", ["/nonexistent/runner", "{prompt}"]]])
        result = judge.ask("q")
        self.assertEqual(result["outcome"], "unchecked")
        self.assertIsNone(result["answer"])
        self.assertEqual(result["attempts"][0]["runner"], "ghost")

    def crashing_table(self):
        crashes = os.path.join(self.tmp, "crashes")
        with open(crashes, "w", encoding="utf-8") as handle:
            handle.write("#!/bin/sh\necho quota >&2\nexit 3\n")
        os.chmod(crashes, 0o755)
        return [["crashes", [crashes, "{prompt}"]], ["fake", [self.runner, "{prompt}"]]]

    def health(self):
        done = subprocess.run([BIN, "status", "--json", "--state-dir", self.state],
                              capture_output=True, text=True, timeout=DEADLINE)
        return {name: r.get("health") for name, r in json.loads(done.stdout)["runners"].items()}

    def test_ask_leaves_a_failing_runner_out_until_the_callers_clock_passes_the_window(self):
        os.environ[judge.RUNNERS_ENV] = json.dumps(self.crashing_table())
        first = judge.ask("q1")
        self.assertEqual([a["runner"] for a in first["attempts"]], ["crashes", "fake"])
        self.assertTrue(self.health()["crashes"]["benched"])
        self.assertEqual([a["runner"] for a in judge.ask("q2")["attempts"]], ["fake"])
        later = time.time() + judge.UNAVAILABLE_SECONDS + 1
        with mock.patch.object(judge.time, "time", return_value=later):
            again = judge.ask("q3")
        self.assertEqual([a["runner"] for a in again["attempts"]], ["crashes", "fake"])
        self.assertFalse(os.path.exists(judge.unavailable_path("crashes")))

    def test_a_changed_unavailable_seconds_is_the_bench_window(self):
        os.environ[judge.RUNNERS_ENV] = json.dumps(self.crashing_table())
        with mock.patch.object(judge, "UNAVAILABLE_SECONDS", 5):
            judge.ask("q1")
        self.assertEqual(self.health()["crashes"]["backoff_seconds"], 5)
        for bad in (0, -1, "soon", float("nan")):
            with mock.patch.object(judge, "UNAVAILABLE_SECONDS", bad), self.assertRaises(ValueError):
                judge.ask("q")

    def test_ask_with_a_bad_runners_variable_is_a_value_error(self):
        os.environ[judge.RUNNERS_ENV] = "not json"
        with self.assertRaises(ValueError) as caught:
            judge.ask("q")
        self.assertIn(judge.RUNNERS_ENV, str(caught.exception))

    def test_python_judge_py_run_judges_one_job(self):
        path = os.path.join(self.state, "jobs", "one.json")
        judge.write_json_atomic(path, self.job("one"))
        done = subprocess.run([sys.executable, DROP_IN, "run", path], timeout=DEADLINE, capture_output=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertFalse(os.path.exists(path))
        self.assertEqual([v["outcome"] for v in judge.drain("T")], ["hit"])
        usage = subprocess.run([sys.executable, DROP_IN], timeout=DEADLINE, capture_output=True, text=True)
        self.assertEqual(usage.returncode, 2)
        self.assertIn("usage: judge.py run", usage.stderr)

    def test_run_job_returns_the_verdict(self):
        path = os.path.join(self.state, "jobs", "rj.json")
        judge.write_json_atomic(path, self.job("rj"))
        self.assertEqual(judge.run_job(path)["outcome"], "hit")

    def test_binary_lookup_order_and_failure_names_the_places(self):
        os.environ.pop(judge.BIN_ENV)
        os.environ["PATH"] = os.path.join(self.tmp, "empty")
        with self.assertRaises(FileNotFoundError) as caught:
            judge.find_binary()
        for place in ("LLM_JUDGE_BIN", "PATH", ".cargo/bin", ".local/bin"):
            self.assertIn(place, str(caught.exception))
        local = os.path.join(self.home, ".local", "bin")
        os.makedirs(local)
        shutil.copy(BIN, os.path.join(local, "llm-judge"))
        self.assertEqual(judge.find_binary(), os.path.join(local, "llm-judge"))
        os.environ[judge.BIN_ENV] = os.path.join(self.tmp, "nope")
        with self.assertRaises(FileNotFoundError) as caught:
            judge.find_binary()
        self.assertIn("LLM_JUDGE_BIN", str(caught.exception))


class TestCatstackEvents(DropInCase):
    def test_events_are_written_when_catstack_sdk_sits_beside_it(self):
        record = os.path.join(self.tmp, "events.jsonl")
        judge_py = catstack_tree(self.tmp, "import json\n"
                         f"RECORD = {record!r}\n"
                         "def write_stage_event(hook, harness, session_id, action, reason, finding_id=None, stderr=None, fields=None):\n"
                         "    with open(RECORD, 'a') as f: f.write(json.dumps([action, hook, reason, finding_id]) + '\\n')\n"
                         "    return True\n"
                         "def write_events(hook, harness, event, findings, mode, mode_source, duration_ms, stderr=None, action=None, finding_id=None):\n"
                         "    with open(RECORD, 'a') as f: f.write(json.dumps(['verdict', hook, action, finding_id]) + '\\n')\n"
                         "    return [{}]\n")
        # A fresh import of this tree's _sdk (Python caches `events` by name).
        for name in ("events", "finding"):
            sys.modules.pop(name, None)
        tree_judge = load_judge("judge_in_tree", judge_py)
        self.start_daemon()
        tree_judge.enqueue(self.job("ev"))
        wait_until("the verdict", lambda: tree_judge.drain("T"))
        with open(record, encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle]
        self.assertEqual(rows, [["judge_queued", "demo", "transcript", "ev"], ["verdict", "demo", "hit", "ev"]])


HOOK_SCRIPT = r'''
import importlib.util, json, os, sys, time
how, judge_path, mode = sys.argv[1], sys.argv[2], sys.argv[3]
if how == "path":
    spec = importlib.util.spec_from_file_location("llm_judge", judge_path)
    judge = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(judge)
else:
    sys.path.insert(0, os.path.dirname(judge_path))
    import judge
if mode == "enqueue":
    started = time.perf_counter()
    ids = [judge.enqueue(json.loads(line)) for line in sys.stdin]
    print(json.dumps({"ids": ids, "ms": (time.perf_counter() - started) * 1000}))
else:
    want, deadline, got = int(sys.argv[4]), time.monotonic() + 60, []
    while len(got) < want and time.monotonic() < deadline:
        got.extend(judge.drain(sys.argv[5]))
        time.sleep(0.05)
    print(json.dumps(got))
'''


class TestBlackBox(DropInCase):
    """A hook-like script drives the drop-in as catstack's hooks do."""

    def hook(self, how, mode, *args, jobs=()):
        script = os.path.join(self.tmp, "hook.py")
        if not os.path.exists(script):
            with open(script, "w", encoding="utf-8") as handle:
                handle.write(HOOK_SCRIPT)
        # Hooks run with a thin PATH: the drop-in finds the binary through LLM_JUDGE_BIN.
        env = dict(os.environ, PATH="/usr/bin:/bin")
        done = subprocess.run(
            [sys.executable, script, how, DROP_IN, mode, *args],
            input="".join(json.dumps(job) + "\n" for job in jobs),
            capture_output=True, text=True, timeout=DEADLINE, env=env,
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        return json.loads(done.stdout), done.stderr

    def test_hooks_with_and_without_a_daemon_each_job_judged_once(self):
        transcript = os.path.join(self.tmp, "session.jsonl")
        with open(transcript, "w", encoding="utf-8") as handle:
            handle.write('{"type": "user"}\n')
        jobs = lambda prefix: [self.job(f"{prefix}-{n}", transcript=transcript) for n in range(10)]
        # No daemon: each job is judged by a detached `llm-judge run`.
        out, err = self.hook("path", "enqueue", jobs=jobs("nodaemon-path"))
        self.assertEqual(len(out["ids"]), 10)
        self.assertIn("no daemon holds the lock", err)
        out, _ = self.hook("syspath", "enqueue", jobs=jobs("nodaemon-syspath"))
        # Then a daemon starts while those runs may still be going: nothing twice.
        self.start_daemon()
        out, err = self.hook("path", "enqueue", jobs=jobs("daemon-path"))
        self.assertNotIn("no daemon", err)
        out, _ = self.hook("syspath", "enqueue", jobs=jobs("daemon-syspath"))
        print(f"\n[latency] hook process: 10 enqueues with a daemon in {out['ms']:.1f} ms", file=sys.stderr)
        folder = judge.verdict_dir(transcript)
        wait_until("40 verdicts", lambda: self.settled() and len([n for n in os.listdir(folder) if not n.startswith(".")]) == 40)
        # What `llm-judge drain` would print: the same verdict files in a copy of the folder.
        twin = os.path.join(self.tmp, "twin")
        shutil.copytree(os.path.join(self.state, "verdicts"), os.path.join(twin, "verdicts"))
        drained, _ = self.hook("syspath", "drain", "40", transcript)
        rust = subprocess.run([BIN, "drain", "--state-dir", twin, "--transcript", transcript],
                              capture_output=True, text=True, timeout=DEADLINE)
        self.assertEqual(rust.returncode, 0, rust.stderr)
        printed = [json.loads(line) for line in rust.stdout.splitlines()]
        # finished_at may differ in its last digit: serde_json (without its
        # float_roundtrip feature) re-parses floats with up to 1 ulp of error.
        self.assertEqual([dict(v, finished_at=None) for v in drained], [dict(v, finished_at=None) for v in printed])
        for ours, theirs in zip(drained, printed):
            self.assertAlmostEqual(ours["finished_at"], theirs["finished_at"], delta=1e-5)
        expected = sorted(f"{p}-{n}" for p in ("nodaemon-path", "nodaemon-syspath", "daemon-path", "daemon-syspath") for n in range(10))
        self.assertEqual(sorted(v["id"] for v in drained), expected)
        self.assertTrue(all(v["outcome"] == "hit" for v in drained))
        # The counting runner: every job judged exactly once.
        self.assertEqual(sorted(self.judged()), sorted(f"judge {i}" for i in expected))
        self.assertEqual(self.hook("path", "drain", "0", transcript)[0], [])


if __name__ == "__main__":
    unittest.main()
