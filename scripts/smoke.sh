#!/usr/bin/env bash
# Checks an installed llm-judge as a user runs it, by name on PATH, in a temporary HOME
# (nothing of the real HOME is read or written):
#   - the binary the install runs is the native one (no Python or shell wrapper),
#   - `llm-judge --version` is Cargo.toml's version,
#   - `llm-judge hooks install claude --dry-run` writes the installed binary's path,
#   - the README's fake-runner demo ("See a verdict in a minute"), run as written,
#     gives a hit.
#
#   scripts/smoke.sh BIN_DIR/llm-judge [NATIVE]
#
# The first argument is what the install put on PATH; NATIVE, the binary it runs, is
# the same file unless given (the npm launcher runs its platform package's binary).
# Used by scripts/check-packages.sh and the release workflow on each platform.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 BIN_DIR/llm-judge [NATIVE]" >&2
  exit 2
fi
command=$1
native=${2:-$1}
bin_dir=$(cd "$(dirname "$command")" && pwd)
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
say() { echo "smoke: $*"; }
fail() { echo "smoke: FAIL: $*" >&2; exit 1; }
real() { python3 -c 'import os, sys; print(os.path.realpath(sys.argv[1]))' "$1"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home" "$work/tmp"
# `run SECS COMMAND...`: as in a user's shell, with this HOME and TMPDIR, the install's
# bin folder first on PATH, none of the variables that would move the config, the state
# or a harness's settings; past SECS seconds, SIGALRM ends it (exit 142).
run() {
  local secs=$1
  shift
  env -u LLM_JUDGE_CONFIG -u CATSTACK_LLM_JUDGE_STATE_DIR -u CATSTACK_LLM_JUDGE_RUNNERS \
    -u XDG_CONFIG_HOME -u XDG_CACHE_HOME -u XDG_STATE_HOME -u CLAUDE_CONFIG_DIR -u CODEX_HOME \
    HOME="$work/home" TMPDIR="$work/tmp" PATH="$bin_dir:$PATH" \
    perl -e 'alarm shift; exec { $ARGV[0] } @ARGV or die "cannot run $ARGV[0]: $!\n"' "$secs" "$@"
}

say "checking $command (runs $native)"
magic=$(head -c 4 "$native" | od -An -tx1 | tr -d ' \n')
case $magic in
  7f454c46) say "ok: the binary is native (ELF)" ;;
  cffaedfe | cefaedfe) say "ok: the binary is native (Mach-O)" ;;
  *) fail "$native is not a native binary (starts with $magic)" ;;
esac

got=$(run 30 llm-judge --version) || fail "llm-judge --version failed"
[ "$got" = "llm-judge $version" ] || fail "llm-judge --version says '$got', not 'llm-judge $version'"
say "ok: $got"

out=$(run 30 llm-judge hooks install claude --dry-run 2>"$work/stderr") \
  || { cat "$work/stderr" >&2; fail "hooks install claude --dry-run failed"; }
written=$(printf '%s\n' "$out" | sed -n 's/^the hooks run \(.*\) with:$/\1/p')
[ -n "$written" ] || fail "hooks install --dry-run names no program:
$out"
case $written in /*) ;; *) fail "the hooks would run $written, not an absolute path" ;; esac
[ "$(real "$written")" = "$(real "$native")" ] \
  || fail "the hooks would run $written, not the installed $native"
[ ! -s "$work/stderr" ] || sed 's/^/smoke:   (said) /' "$work/stderr"
say "ok: hooks install claude --dry-run writes $written"

# The README's demo, as written there.
demo=$(awk '/^## See a verdict in a minute/ {on = 1} on && /^```sh$/ {inside = 1; next} inside && /^```$/ {exit} inside {print}' "$root/README.md")
[ -n "$demo" ] || fail "README.md has no demo block under 'See a verdict in a minute'"
# `wait`: the demo's daemon (stopped by its `kill %1`) has ended when this returns.
if ! run 120 bash -c "$demo"$'\n''wait' >"$work/demo.out" 2>&1; then
  cat "$work/demo.out" >&2
  fail "the README's demo failed"
fi
grep -q '"outcome":"hit"' "$work/demo.out" || { cat "$work/demo.out" >&2; fail "the README's demo gave no hit"; }
say "ok: the README's fake-runner demo gives a hit"
