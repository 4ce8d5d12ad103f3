#!/usr/bin/env python3
"""The names and shapes catstack's own judge tests use (issue 31): runners(), the shipped
tables, verdict(), bounded_timeout(), run_runner(), the module constants read at call
time, catstack's attempt shape, its judge.log wording and events, and
run-catstack-tests.sh.

Run: LLM_JUDGE_BIN=target/debug/llm-judge python3 -m unittest discover -s integrations/catstack/tests -v
Each test has its own temp HOME and state folder (test_judge.DropInCase); every process
it starts is reaped; every wait polls a condition against a deadline.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import time
import unittest
from unittest import mock

from test_judge import BIN, DEADLINE, HERE, DropInCase, catstack_tree, judge, load_judge, wait_until

CASES = os.path.join(HERE, "fixtures", "verdict_cases.json")
SCRIPT = os.path.join(os.path.dirname(HERE), "run-catstack-tests.sh")


def binary_table(*args, env=None):
    done = subprocess.run([BIN, "runners", *args], capture_output=True, text=True, timeout=DEADLINE, env=env)
    assert done.returncode == 0, done.stderr
    return [(name, argv) for name, argv in json.loads(done.stdout)]


def forget_sdk_modules():
    """Each test's fake catstack _sdk is imported afresh (Python caches `events` by name)."""
    for name in ("events", "finding"):
        sys.modules.pop(name, None)


class CompatCase(DropInCase):
    def script(self, name, body):
        """A runner script (written before anything runs it) and its [name, argv] entry."""
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("#!/bin/sh\n" + body + "\n")
        os.chmod(path, 0o755)
        return [name, [path, "{prompt}"]]

    def use(self, *entries):
        os.environ[judge.RUNNERS_ENV] = json.dumps(list(entries))

    def config(self, text):
        path = os.path.join(self.tmp, "config.toml")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.environ["LLM_JUDGE_CONFIG"] = path

    def job_file(self, marker, **extra):
        path = os.path.join(self.state, "jobs", f"{marker}.json")
        judge.write_json_atomic(path, self.job(marker, **extra))
        return path

    def log_text(self):
        with open(os.path.join(self.state, "judge.log"), encoding="utf-8") as handle:
            return handle.read()

    def patch(self, name, value):
        patcher = mock.patch.object(judge, name, value)
        patcher.start()
        self.addCleanup(patcher.stop)


HANG = "n=0; while [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done"
MINE = [["mine", ["/bin/mine", "{prompt}"]]]


class TestRunnerTables(CompatCase):
    def test_runners_is_the_table_llm_judge_uses_for_the_mode(self):
        fake = [("fake", [self.runner, "{prompt}"])]
        for mode in (None, "default", "investigate", "anything else"):
            got = judge.runners(mode) if mode else judge.runners()
            self.assertEqual(got, fake, mode)
            self.assertIsInstance(got[0], tuple)
        self.assertEqual(judge.runners("investigate"), binary_table("--mode", "investigate"))

    def test_without_the_variable_the_config_file_else_the_shipped_table(self):
        os.environ.pop(judge.RUNNERS_ENV)
        shipped = binary_table("--shipped")
        self.assertEqual(judge.runners(), shipped)
        self.assertEqual([name for name, _ in shipped], ["claude", "codex", "cursor"])
        investigate = judge.runners("investigate")
        self.assertEqual([name for name, _ in investigate], ["codex", "claude"])
        self.assertNotIn("cursor-agent", [argv[0] for _, argv in investigate])
        self.config('[[runners.default]]\nname = "mine"\nargv = ["/bin/mine", "{prompt}"]\n')
        self.assertEqual(judge.runners(), [tuple(row) for row in MINE])
        self.assertEqual(judge.runners("investigate"), investigate)

    def test_a_bad_variable_or_config_is_a_value_error_that_names_it(self):
        os.environ[judge.RUNNERS_ENV] = "not json"
        with self.assertRaises(ValueError) as caught:
            judge.runners()
        self.assertIn(judge.RUNNERS_ENV, str(caught.exception))
        os.environ.pop(judge.RUNNERS_ENV)
        self.config("no_such_key = 1\n")
        with self.assertRaises(ValueError) as caught:
            judge.runners()
        self.assertIn("no_such_key", str(caught.exception))

    def test_shipped_constants_are_the_binarys_shipped_tables(self):
        self.config('[[runners.default]]\nname = "mine"\nargv = ["/bin/mine", "{prompt}"]\n')
        fresh = load_judge("judge_shipped")
        default = binary_table("--shipped")
        self.assertEqual(fresh.DEFAULT_RUNNERS, tuple(default))
        self.assertEqual(fresh.INVESTIGATE_RUNNERS, tuple(binary_table("--shipped", "--mode", "investigate")))
        self.assertIsInstance(fresh.DEFAULT_RUNNERS[0], tuple)
        claude = dict(default)["claude"]
        self.assertEqual(fresh.SLIM_CLAUDE_ARGV, claude)
        self.assertEqual(fresh.JUDGE_SYSTEM_PROMPT, claude[claude.index("--system-prompt") + 1])
        self.assertTrue(fresh.JUDGE_SYSTEM_PROMPT)
        self.assertFalse(hasattr(fresh, "NO_SUCH_NAME"))


class TestVerdict(CompatCase):
    def test_the_cases_shared_with_the_daemons_verdict_rules(self):
        with open(CASES, encoding="utf-8") as handle:
            cases = json.load(handle)["cases"]
        self.assertGreaterEqual(len(cases), 10)
        for case in cases:
            before = time.time()
            got = judge.verdict(case["job"], case["result"])
            self.assertTrue(before <= got.pop("finished_at") <= time.time(), case["name"])
            self.assertEqual(got, case["verdict"], case["name"])

    def test_catstack_result_shapes_without_attempts_or_runner(self):
        job = self.job("v", hit_if_any_true={"a": "notice A", "b": "notice B"})
        hit = judge.verdict(job, {"outcome": "answered", "answer": {"a": True}, "runner": "fake"})
        self.assertEqual((hit["outcome"], hit["on_hit"], hit["attempts"]), ("hit", "notice A", []))
        unchecked = judge.verdict(job, {"outcome": "unchecked"})
        self.assertEqual((unchecked["outcome"], unchecked["reason"]), ("unchecked", "no runner answered"))

    def test_a_rule_of_the_wrong_shape_is_a_value_error(self):
        answered = {"outcome": "answered", "answer": {}, "runner": "r", "attempts": []}
        for bad in ({"hit_if_all_true": "match"}, {"hit_if_all_true": [1]}, {"hit_if_any_true": ["a"]},
                    {"hit_if_any_true": {"a": 1}}):
            with self.assertRaises(ValueError, msg=bad):
                judge.verdict(dict(self.job("v"), **bad), answered)


class TestTimeouts(CompatCase):
    def test_bounded_timeout_uses_the_constants_at_call_time(self):
        self.assertEqual(judge.bounded_timeout(999), 600)
        self.assertEqual(judge.bounded_timeout(1.5), 1.5)
        for bad in (None, True, "5", 0, -1, math.nan):
            self.assertEqual(judge.bounded_timeout(bad), judge.TIMEOUT_SECONDS, bad)
        self.patch("TIMEOUT_SECONDS", 7)
        self.patch("INVESTIGATE_TIMEOUT_CAP", 100)
        self.assertEqual((judge.bounded_timeout(None), judge.bounded_timeout(999)), (7, 100))

    def test_ask_times_out_after_a_patched_timeout_seconds(self):
        self.use(self.script("hangs", HANG), ["fake", [self.runner, "{prompt}"]])
        self.patch("TIMEOUT_SECONDS", 1)
        result = judge.ask("q")
        self.assertTrue(result["attempts"][0]["reason"].startswith("timed out after 1s"), result)
        self.assertEqual(result["runner"], "fake")

    def test_ask_uses_a_patched_cap_and_kill_grace(self):
        self.use(self.script("deaf", "trap '' TERM\n" + HANG))
        self.patch("INVESTIGATE_TIMEOUT_CAP", 1)
        self.patch("KILL_GRACE_SECONDS", 0.2)
        started = time.monotonic()
        result = judge.ask("q", timeout_seconds=30)
        # A runner deaf to SIGTERM ends at the cap plus the grace; llm-judge's own grace is 5 s.
        self.assertLess(time.monotonic() - started, 4)
        self.assertEqual(result["attempts"][0]["reason"], "timed out after 1s")

    def test_constants_left_alone_leave_llm_judges_config_in_charge(self):
        self.assertEqual(judge._set_flags(), [])
        self.config("default_timeout_seconds = 1\n")
        self.use(self.script("hangs", HANG))
        self.assertEqual(judge.ask("q")["attempts"][0]["reason"], "timed out after 1s")

    def test_a_constant_that_is_not_seconds_is_a_value_error_naming_it(self):
        self.patch("TIMEOUT_SECONDS", "soon")
        with self.assertRaises(ValueError) as caught:
            judge.ask("q")
        self.assertIn("judge.TIMEOUT_SECONDS", str(caught.exception))

    def test_enqueue_and_run_job_use_a_patched_timeout_seconds(self):
        self.use(self.script("hangs", HANG))
        self.patch("TIMEOUT_SECONDS", 1)
        self.assertEqual(judge.run_job(self.job_file("run-job"))["reason"],
                         "no runner answered: hangs: timed out after 1s")
        judge.enqueue(self.job("no-daemon", transcript="N"))  # a detached `llm-judge run`
        self.start_daemon()
        judge.enqueue(self.job("daemon", transcript="D"))
        judge.enqueue(self.job("own-timeout", transcript="D", timeout_seconds=2))
        got = []
        wait_until("three verdicts", lambda: got.extend(judge.drain("N") + judge.drain("D")) or len(got) == 3)
        reasons = {v["id"]: v["reason"] for v in got}
        self.assertEqual(reasons, {"no-daemon": "no runner answered: hangs: timed out after 1s",
                                   "daemon": "no runner answered: hangs: timed out after 1s",
                                   "own-timeout": "no runner answered: hangs: timed out after 2s"})


class TestAttemptShape(CompatCase):
    def test_ask_and_run_job_return_catstacks_attempts_and_drain_keeps_elapsed_ms(self):
        self.use(["ghost", [os.path.join(self.tmp, "no-such-runner"), "{prompt}"]], ["fake", [self.runner, "{prompt}"]])
        expected = [{"runner": "ghost", "ok": False, "reason": "not installed"},
                    {"runner": "fake", "ok": True, "reason": "answered"}]
        self.assertEqual(judge.ask("q")["attempts"], expected)
        # The ask benched the missing runner (runner health): the job tries it last.
        self.assertEqual(judge.run_job(self.job_file("shape"))["attempts"], expected[1:])
        drained = judge.drain("T")
        self.assertEqual([sorted(a) for a in drained[0]["attempts"]], [["elapsed_ms", "ok", "reason", "runner"]])
        self.patch("ATTEMPT_ELAPSED_MS", True)
        self.assertIn("elapsed_ms", judge.ask("q")["attempts"][0])


class TestRunRunner(CompatCase):
    def test_one_runner_through_the_binary(self):
        attempt, answer = judge.run_runner("fake", [self.runner, "{prompt}"], "judge rr")
        self.assertEqual((attempt, answer), ({"runner": "fake", "ok": True, "reason": "answered"}, {"match": True}))
        self.assertEqual(self.judged(), ["judge rr"])
        ghost = judge.run_runner("ghost", [os.path.join(self.tmp, "none"), "{prompt}"], "q")
        self.assertEqual(ghost, ({"runner": "ghost", "ok": False, "reason": "not installed"}, None))
        name, argv = self.script("crashes", "echo 'quota gone' >&2; exit 3")
        self.assertEqual(judge.run_runner(name, argv, "q")[0]["reason"], "exit 3: quota gone")
        with self.assertRaises(ValueError):
            judge.run_runner("empty", [], "q")

    def test_the_cwd_reaches_the_runner_else_a_fresh_folder(self):
        name, argv = self.script("where", "printf '{\"cwd\": \"%s\"}\\n' \"$(pwd)\"")
        here = os.path.join(self.tmp, "work")
        os.makedirs(here)
        self.assertEqual(judge.run_runner(name, argv, "q", cwd=here)[1]["cwd"], os.path.realpath(here))
        fresh = judge.run_runner(name, argv, "q")[1]["cwd"]
        self.assertNotEqual(fresh, os.path.realpath(here))
        self.assertFalse(os.path.exists(fresh))

    def test_a_replaced_run_runner_sees_each_runner_call_of_run_job_and_ask(self):
        self.use(["first", ["/bin/first", "{prompt}"]], ["second", ["/bin/second", "{prompt}"]])
        calls = []

        def capture(name, argv, prompt, timeout_seconds=None, cwd=None):
            calls.append((name, argv[0], prompt, timeout_seconds, cwd))
            if name == "first":
                return {"runner": name, "ok": False, "reason": "exit 1"}, None
            return {"runner": name, "ok": True, "reason": "answered"}, {"match": True}

        self.patch("run_runner", capture)
        path = self.job_file("replaced", timeout_seconds=7, cwd=self.tmp, mode="investigate")
        verdict = judge.run_job(path)
        self.assertEqual(calls, [("first", "/bin/first", "judge replaced", 7, self.tmp),
                                 ("second", "/bin/second", "judge replaced", 7, self.tmp)])
        self.assertEqual((verdict["outcome"], verdict["runner"]), ("hit", "second"))
        self.assertFalse(os.path.exists(path))
        self.assertEqual([v["id"] for v in judge.drain("T")], ["replaced"])
        calls.clear()
        self.assertEqual(judge.ask("asked")["runner"], "second")
        self.assertEqual([c[3] for c in calls], [judge.TIMEOUT_SECONDS] * 2)


FAKE_SDK = r'''
import json, os
RECORD = os.environ["EVENT_RECORD"]
def _mode():
    return os.environ.get("EVENT_MODE", "ok")
def _write(row):
    with open(RECORD, "a") as f: f.write(json.dumps(row) + "\n")
def write_stage_event(hook, harness, session_id, action, reason, finding_id=None, stderr=None, fields=None):
    if _mode() == "raise": raise OSError("disk gone")
    if _mode() == "fail":
        stderr.write("catstack-hook-error: event write failed: occupied")
        return False
    _write([action, hook, reason, finding_id])
    return True
def write_events(hook, harness, event, findings, mode, mode_source, duration_ms, stderr=None, action=None, finding_id=None):
    if _mode() == "raise": raise OSError("disk gone")
    if _mode() == "fail":
        stderr.write("catstack-hook-error: event write failed: occupied")
        return []
    _write(["verdict", hook, action, finding_id])
    return [{}]
'''


class TestLogAndEvents(CompatCase):
    def tree_judge(self):
        judge_py = catstack_tree(self.tmp, FAKE_SDK, link=True)
        os.environ["EVENT_RECORD"] = os.path.join(self.tmp, "events.jsonl")
        forget_sdk_modules()
        self.addCleanup(forget_sdk_modules)
        return load_judge(f"judge_tree_{id(self)}", judge_py)

    def rows(self):
        with open(os.environ["EVENT_RECORD"], encoding="utf-8") as handle:
            return [json.loads(line) for line in handle]

    def test_a_broken_runner_table_logs_catstacks_job_failed_line(self):
        os.environ[judge.RUNNERS_ENV] = "not json"
        verdict = judge.run_job(self.job_file("broken-job"))
        self.assertEqual(verdict["outcome"], "unchecked")
        self.assertIn(judge.RUNNERS_ENV, verdict["reason"])
        lines = [line for line in self.log_text().splitlines() if "job broken-job failed" in line]
        self.assertEqual(len(lines), 1, self.log_text())
        self.assertIn(judge.RUNNERS_ENV, lines[0])
        # The same words when a replaced run_runner judges in this process.
        self.patch("run_runner", lambda *a, **k: self.fail("no runner may start"))
        self.assertEqual(judge.run_job(self.job_file("broken-again"))["outcome"], "unchecked")
        self.assertIn("job broken-again failed: ValueError", self.log_text())

    def test_run_job_writes_a_judge_finished_event_and_drain_a_verdict_event(self):
        tree = self.tree_judge()
        self.assertEqual(tree.run_job(self.job_file("ev"))["outcome"], "hit")
        tree.drain("T")
        self.assertEqual(self.rows(), [["judge_finished", "demo", "hit", "ev"], ["verdict", "demo", "hit", "ev"]])

    def test_event_write_failures_are_logged_in_catstacks_words(self):
        tree = self.tree_judge()
        for mode, detail in (("fail", "occupied"), ("raise", "OSError: disk gone")):
            os.environ["EVENT_MODE"] = mode
            marker = f"ev-{mode}"
            tree.run_job(self.job_file(marker))
            self.assertEqual([v["id"] for v in tree.drain("T")], [marker])
            log = self.log_text()
            self.assertIn(f"job {marker}: finished event not written:", log)
            self.assertIn(f"drain: event write failed for verdict {marker}: ", log)
            self.assertIn(detail, log)


class TestOtherNames(CompatCase):
    def test_the_names_catstacks_tests_and_callers_use(self):
        for name in ("runners", "verdict", "bounded_timeout", "run_runner", "run_job", "clip", "clip_prompt_field"):
            self.assertTrue(callable(getattr(judge, name)), name)
        self.assertEqual((judge.TIMEOUT_SECONDS, judge.INVESTIGATE_TIMEOUT_CAP, judge.KILL_GRACE_SECONDS), (60, 600, 5))
        self.assertEqual(judge.NOT_INSTALLED, "not installed")
        self.assertEqual(judge.clip("label", "x" * 400), "label: " + "x" * 293)
        self.assertEqual(judge.clip_prompt_field("  " + "y" * 5000 + "END  "), "y" * 3997 + "END")


class TestRunCatstackTests(CompatCase):
    """The script a migrating user runs on their own catstack checkout."""

    def checkout(self):
        root = os.path.join(self.tmp, "catstack")
        tests = os.path.join(root, "engine", "hooks", "llm-judge", "tests")
        os.makedirs(tests)
        self.original = os.path.join(root, "engine", "hooks", "llm-judge", "judge.py")
        with open(self.original, "w", encoding="utf-8") as handle:
            handle.write("ORIGINAL = True\n")
        with open(os.path.join(tests, "test_fake.py"), "w", encoding="utf-8") as handle:
            handle.write(
                "import os, sys, unittest\n"
                "sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))\n"
                "import judge\n"
                "class T(unittest.TestCase):\n"
                "    def test_the_drop_in_is_judge(self):\n"
                "        self.assertTrue(callable(judge.runners))\n"
                f"    def test_home_and_variables_are_the_scripts(self):\n"
                f"        self.assertNotEqual(os.environ['HOME'], {self.home!r})\n"
                "        self.assertNotIn('CATSTACK_LLM_JUDGE_STATE_DIR', os.environ)\n"
                "        self.assertEqual(judge.runners()[0][0], 'claude')\n")
        return root

    def run_script(self, *args):
        env = dict(os.environ, PATH="/usr/bin:/bin", PYTHON=sys.executable)
        return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, timeout=DEADLINE, env=env)

    def test_it_runs_a_checkouts_tests_on_the_drop_in_and_on_the_original(self):
        root = self.checkout()
        done = self.run_script(root)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("test_fake.py: 2 run, 2 passed, 0 failed, 0 errors", done.stdout)
        done = self.run_script("--original", "--keep", root, "test_fake.py")
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("test_fake.py: 2 run, 0 passed, 0 failed, 2 errors", done.stdout)
        self.assertIn("ERROR: test_the_drop_in_is_judge", done.stdout)
        kept = done.stdout.strip().splitlines()[-1].split()[1]
        self.assertTrue(os.path.isfile(os.path.join(kept, "logs", "test_fake.log")))
        shutil.rmtree(kept)
        self.assertFalse(os.path.islink(self.original))
        with open(self.original, encoding="utf-8") as handle:
            self.assertEqual(handle.read(), "ORIGINAL = True\n")

    def test_bad_usage_is_exit_2_and_says_why(self):
        self.assertEqual(self.run_script().returncode, 2)
        done = self.run_script(self.tmp)
        self.assertEqual(done.returncode, 2)
        self.assertIn("give the root of a catstack checkout", done.stderr)


if __name__ == "__main__":
    unittest.main()
