#!/usr/bin/env python3
"""The drop-in with an llm-judge binary older than `ask --now` (catstack users replace
judge.py and the binary separately): ask() still answers.

Run: python3 -m unittest discover -s integrations/catstack/tests -v
The binary here is a fake: a small script that refuses `--now` exactly as such a
binary's command line does (clap: exit 2, "unexpected argument '--now' found") and
otherwise answers `ask` with one JSON line. Each test has its own temp HOME and state
folder; every process it starts ends before ask() returns.
"""
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
DROP_IN = os.path.join(os.path.dirname(HERE), "judge.py")

spec = importlib.util.spec_from_file_location("judge_with_older_binary", DROP_IN)
judge = importlib.util.module_from_spec(spec)
spec.loader.exec_module(judge)

# An llm-judge from before `ask --now`: records each argv, refuses --now as clap does,
# and answers `ask` (FAKE_USAGE_ERROR makes it refuse every call with another usage error).
OLDER_BINARY = f"""#!{sys.executable}
import json, os, sys
with open(os.environ["FAKE_CALLS"], "a", encoding="utf-8") as calls:
    calls.write(json.dumps(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_USAGE_ERROR"):
    sys.stderr.write("error: invalid value 'x' for '--timeout <SECONDS>'\\n")
    sys.exit(2)
if "--now" in sys.argv[1:]:
    sys.stderr.write("error: unexpected argument '--now' found\\n\\n"
                     "Usage: llm-judge ask --prompt-file <FILE|-> [PROMPT]\\n\\n"
                     "For more information, try '--help'.\\n")
    sys.exit(2)
if "ask" not in sys.argv[1:]:
    sys.exit(1)
prompt = sys.stdin.read()
print(json.dumps({{"outcome": "answered", "runner": "old", "answer": {{"match": True, "prompt": prompt}},
                  "attempts": [{{"runner": "old", "ok": True, "reason": "answered", "elapsed_ms": 1}}]}}))
"""


class TestOlderBinary(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="dropin-old-")
        self.home = os.path.join(self.tmp, "home")
        self.state = os.path.join(self.tmp, "state")
        os.makedirs(self.home)
        self.calls = os.path.join(self.tmp, "calls")
        binary = os.path.join(self.tmp, "llm-judge")
        # Written before anything is spawned (no "Text file busy").
        with open(binary, "w", encoding="utf-8") as handle:
            handle.write(OLDER_BINARY)
        os.chmod(binary, 0o755)
        env = {
            "HOME": self.home,
            "XDG_CONFIG_HOME": os.path.join(self.home, ".config"),
            judge.STATE_ENV: self.state,
            judge.BIN_ENV: binary,
            "FAKE_CALLS": self.calls,
        }
        self.env = mock.patch.dict(os.environ, env)
        self.env.start()
        for name in (judge.CHILD_ENV, judge.RUNNERS_ENV, "LLM_JUDGE_CONFIG", "FAKE_USAGE_ERROR"):
            os.environ.pop(name, None)
        judge._said_no_now = False

    def tearDown(self):
        self.env.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def argvs(self):
        with open(self.calls, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle]

    def judge_log(self):
        try:
            with open(os.path.join(self.state, "judge.log"), encoding="utf-8") as handle:
                return handle.read()
        except FileNotFoundError:
            return ""

    def test_ask_on_the_real_clock_passes_no_now_and_answers(self):
        result = judge.ask("is it?", timeout_seconds=10)
        self.assertEqual(result["outcome"], "answered", result)
        self.assertEqual(result["answer"], {"match": True, "prompt": "is it?"})
        self.assertEqual(len(self.argvs()), 1, "one call, no retry")
        self.assertNotIn("--now", self.argvs()[0])

    def test_ask_with_a_patched_clock_retries_once_without_now_and_says_so_once(self):
        later = time.time() + judge.UNAVAILABLE_SECONDS + 1
        with mock.patch.object(judge.time, "time", return_value=later):
            first = judge.ask("one")
            second = judge.ask("two")
        self.assertEqual((first["outcome"], second["outcome"]), ("answered", "answered"))
        argvs = self.argvs()
        self.assertEqual(["--now" in argv for argv in argvs], [True, False, True, False], argvs)
        self.assertEqual(argvs[0][argvs[0].index("--now") + 1], repr(later))
        self.assertEqual(self.judge_log().count("has no --now"), 1, self.judge_log())

    def test_run_runner_works_with_an_older_binary(self):
        attempt, answer = judge.run_runner("old", ["old-cli", "{prompt}"], "q")
        self.assertEqual((attempt["runner"], answer["match"]), ("old", True))

    def test_another_usage_error_is_still_a_value_error_and_not_retried(self):
        os.environ["FAKE_USAGE_ERROR"] = "1"
        with mock.patch.object(judge.time, "time", return_value=time.time()), \
                self.assertRaises(ValueError) as caught:
            judge.ask("q")
        self.assertIn("--timeout", str(caught.exception))
        self.assertEqual(len(self.argvs()), 1)


if __name__ == "__main__":
    unittest.main()
