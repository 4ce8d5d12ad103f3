#!/usr/bin/env bash
# Runs a catstack checkout's own judge tests (engine/hooks/llm-judge/tests) against the
# drop-in judge.py beside this script, the way catstack installs it: judge.py replaced by
# a symlink to the drop-in. The checkout is never changed: its engine/hooks folder is
# copied into a temp folder, and the tests run there with a temp HOME and no judge
# variables of yours, so nothing reaches your own state folder or runners.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}

usage() {
  cat <<'EOF'
Usage: run-catstack-tests.sh [--original] [--keep] CATSTACK_DIR [TEST_FILE...]

Runs CATSTACK_DIR/engine/hooks/llm-judge/tests/TEST_FILE (default: every test_*.py)
with llm-judge's drop-in in place of catstack's judge.py, one file at a time, and prints
per file: tests run, passed, failed, errors, seconds, and the names of those that failed.

  --original  run the same tests on the checkout's own judge.py (the baseline)
  --keep      keep the temp folder (copied tree, HOME, one log per file) and print it

The drop-in finds the binary through LLM_JUDGE_BIN; this script sets it from
LLM_JUDGE_BIN, else llm-judge on PATH, ~/.cargo/bin, ~/.local/bin, then this
repository's target/release and target/debug builds. PYTHON picks the interpreter
(default python3). Exit 0 when every test passed, 1 when one did not, 2 on bad usage.

Example:
  integrations/catstack/run-catstack-tests.sh ~/src/catstack test_judge.py test_inbox.py
EOF
}

original=0
keep=0
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in
    --original) original=1 ;;
    --keep) keep=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run-catstack-tests: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [[ $# -lt 1 ]]; then
  usage >&2
  exit 2
fi
checkout=$1
shift
if [[ ! -f $checkout/engine/hooks/llm-judge/judge.py || ! -d $checkout/engine/hooks/llm-judge/tests ]]; then
  echo "run-catstack-tests: $checkout has no engine/hooks/llm-judge/judge.py and tests/;" \
    "give the root of a catstack checkout" >&2
  exit 2
fi

find_binary() {
  local candidate
  for candidate in "${LLM_JUDGE_BIN:-}" "$(command -v llm-judge || true)" \
    "$HOME/.cargo/bin/llm-judge" "$HOME/.local/bin/llm-judge" \
    "$here/../../target/release/llm-judge" "$here/../../target/debug/llm-judge"; do
    if [[ -n $candidate && -f $candidate && -x $candidate ]]; then
      (cd "$(dirname "$candidate")" && echo "$PWD/$(basename "$candidate")")
      return 0
    fi
  done
  return 1
}
if ! bin=$(find_binary); then
  echo "run-catstack-tests: llm-judge not found: looked in \$LLM_JUDGE_BIN, PATH, ~/.cargo/bin," \
    "~/.local/bin and $here/../../target/{release,debug}; build it (cargo build) or set LLM_JUDGE_BIN" >&2
  exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/catstack-tests.XXXXXX")
if [[ $keep == 0 ]]; then
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work/engine" "$work/home/.config" "$work/logs"
cp -R "$checkout/engine/hooks" "$work/engine/hooks"
lib="$work/engine/hooks/llm-judge"
if [[ $original == 0 ]]; then
  rm -f "$lib/judge.py"
  ln -s "$here/judge.py" "$lib/judge.py"
  under_test="the drop-in ($here/judge.py, binary $bin)"
else
  under_test="catstack's own judge.py"
fi

if [[ $# -eq 0 ]]; then
  set -- "$lib"/tests/test_*.py
fi

export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" LLM_JUDGE_BIN="$bin"
unset CATSTACK_LLM_JUDGE_STATE_DIR CATSTACK_LLM_JUDGE_RUNNERS CATSTACK_LLM_JUDGE_CHILD \
  LLM_JUDGE_CONFIG CATSTACK_HOOK_METRICS_DIR

now() { "$python" -c 'import time; print(time.time())'; }

echo "catstack tests of $checkout on $under_test"
status=0
for file in "$@"; do
  name=$(basename "$file")
  if [[ ! -f $lib/tests/$name ]]; then
    echo "run-catstack-tests: $lib/tests has no $name" >&2
    status=1
    continue
  fi
  log="$work/logs/${name%.py}.log"
  started=$(now)
  (cd "$work" && "$python" -m unittest discover -s engine/hooks/llm-judge/tests -p "$name" -v) \
    >"$log" 2>&1 || status=1
  ended=$(now)
  "$python" - "$log" "$name" "$started" "$ended" <<'PY'
import re, sys
log, name, started, ended = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
text = open(log, encoding="utf-8", errors="replace").read()
ran = re.search(r"^Ran (\d+) tests?", text, re.M)
counts = {k: int(v) for k, v in re.findall(r"(failures|errors|skipped|expected failures|unexpected successes)=(\d+)", text.splitlines()[-1] if text else "")}
total = int(ran.group(1)) if ran else 0
failed, errors, skipped = counts.get("failures", 0), counts.get("errors", 0), counts.get("skipped", 0)
if not ran:
    print(f"{name}: did not run (import error?); last lines:\n" + "\n".join(text.splitlines()[-5:]))
    sys.exit(0)
passed = total - failed - errors - skipped
print(f"{name}: {total} run, {passed} passed, {failed} failed, {errors} errors"
      + (f", {skipped} skipped" if skipped else "") + f", {ended - started:.1f} s")
for kind, test in re.findall(r"^(FAIL|ERROR): (\S+)", text, re.M):
    print(f"  {kind}: {test}")
PY
done
if [[ $keep == 1 ]]; then
  echo "kept: $work (logs in $work/logs)"
fi
exit "$status"
