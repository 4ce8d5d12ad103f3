#!/usr/bin/env bash
# Installs the packages in DIR for this platform the ways users do, offline, into
# temporary places, and checks each (docs/install.md): the wheel with pip --no-index
# into a fresh venv, uv tool install --offline and pipx install; the npm launcher and
# this platform's package with npm install -g --offline into a temporary prefix.
# On each, scripts/smoke.sh (native binary, version, hooks install's path, the
# README's demo); then that uvx, pipx run and npx are refused by hooks install, that the
# npm launcher forwards exit codes and signals, and that without its platform package it
# names the reinstall command. Nothing is read from or written to the real HOME.
#
#   scripts/check-install.sh target/packages     # after scripts/check-packages.sh built them
#   scripts/check-install.sh dist                # the release workflow, on each platform
#
# Needs python3 (3.9+), node and npm, perl; uv and pipx come from
# scripts/package-tools.sh (pinned).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
start=$SECONDS
step() { printf '\n== check-install: %s (%d s in)\n' "$*" $((SECONDS - start)); }
fail() { echo "check-install: FAIL: $*" >&2; exit 1; }
# `bounded SECS COMMAND...`: past SECS seconds SIGALRM ends it (exit 142).
bounded() { local secs=$1; shift; perl -e 'alarm shift; exec { $ARGV[0] } @ARGV or die "cannot run $ARGV[0]: $!\n"' "$secs" "$@"; }
if [ $# -ne 1 ]; then
  echo "usage: $0 DIR (holding the wheel and the npm tarballs)" >&2
  exit 2
fi
dir=$(cd "$1" && pwd)
tools=$("$root/scripts/package-tools.sh")
export PATH="$tools:$PATH"
python=$(python3 -c 'import sys; print(sys.executable)')
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
npm_name=$(node -p 'require(process.argv[1]).name' "$root/packaging/npm/llm-judge/package.json")
platform=$(node -p 'process.platform + "-" + process.arch')
case $platform in
  linux-x64) wheel_glob="*linux*_x86_64.whl" ;;
  linux-arm64) wheel_glob="*linux*_aarch64.whl" ;;
  darwin-x64) wheel_glob="*macosx_*_x86_64.whl" ;;
  darwin-arm64) wheel_glob="*macosx_*_arm64.whl" ;;
  *) fail "no packages for the platform $platform" ;;
esac
wheel=$(find "$dir" -maxdepth 1 -name "llm_judge-$version-$wheel_glob" | head -n 1)
[ -n "$wheel" ] || fail "no $platform wheel of $version in $dir"
scope_name=${npm_name#@}
scope_name=${scope_name/\//-}
tarballs=("$dir/$scope_name-$version.tgz" "$dir/$scope_name-$platform-$version.tgz")
for t in "$wheel" "${tarballs[@]}"; do
  [ -f "$t" ] || fail "no $t"
  echo "$(basename "$t"): $(du -k "$t" | cut -f1) KiB"
done
work=$(mktemp -d)
daemons=()
# A daemon the checks started is stopped (by its pid) if a check failed before it did.
cleanup() {
  # (the guarded expansion: bash 3.2, macOS's, calls an empty array unbound under set -u)
  for pid in ${daemons[@]+"${daemons[@]}"}; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# From here on every tool sees a temporary HOME: no user config is read, nothing lands
# in the real one. This python3 comes first on PATH, so no shim needs HOME either.
mkdir -p "$work/home"
python_dir=$(dirname "$python")
export HOME=$work/home PATH="$python_dir:$PATH"
unset XDG_CONFIG_HOME XDG_CACHE_HOME XDG_DATA_HOME PIP_INDEX_URL PIP_EXTRA_INDEX_URL

step "pip install --no-index into a fresh venv"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --no-index --disable-pip-version-check "$wheel"
"$root/scripts/smoke.sh" "$work/venv/bin/llm-judge"

step "uv tool install --offline"
export UV_CACHE_DIR=$work/uv/cache UV_TOOL_DIR=$work/uv/tools UV_TOOL_BIN_DIR=$work/uv/bin \
  UV_PYTHON_DOWNLOADS=never UV_NO_CONFIG=1
bounded 120 uv tool install --offline --python "$python" "$wheel"
"$root/scripts/smoke.sh" "$work/uv/bin/llm-judge"

step "pipx install (no index)"
export PIPX_HOME=$work/pipx PIPX_BIN_DIR=$work/pipx/bin PIPX_MAN_DIR=$work/pipx/man
bounded 120 pipx install --python "$python" --pip-args=--no-index "$wheel"
"$root/scripts/smoke.sh" "$work/pipx/bin/llm-judge"

step "uvx and pipx run: hooks install is refused, naming the install that stays"
refused() {
  local what=$1 install=$2
  shift 2
  local rc=0
  bounded 120 "$@" llm-judge hooks install claude --dry-run >"$work/refused.out" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || { cat "$work/refused.out" >&2; fail "$what: hooks install exited $rc, not 2"; }
  grep -qF "\`$install\`" "$work/refused.out" || { cat "$work/refused.out" >&2; fail "$what: the refusal does not name $install"; }
  echo "ok: $what refused: $(grep -F "$install" "$work/refused.out" | head -n 1 | cut -c1-160)…"
}
refused uvx "uv tool install llm-judge" uvx --isolated --offline --python "$python" --from "$wheel"
refused "pipx run" "pipx install llm-judge" pipx run --python "$python" --pip-args=--no-index --spec "$wheel"

npm_flags=(--offline --cache "$work/npm-cache" --no-audit --no-fund --no-update-notifier)

step "npm install -g, offline, into a temporary prefix"
bounded 120 npm install -g --prefix "$work/npm" "${npm_flags[@]}" "${tarballs[@]}"
native=$work/npm/lib/node_modules/$npm_name-$platform/bin/llm-judge
head -n 1 "$work/npm/bin/llm-judge" | grep -q node || fail "$work/npm/bin/llm-judge is not the node launcher"
"$root/scripts/smoke.sh" "$work/npm/bin/llm-judge" "$native"

step "the npm launcher: exit codes and signals"
launcher=$work/npm/bin/llm-judge
rc=0; bounded 30 "$launcher" enqueue --no-such-flag >/dev/null 2>&1 || rc=$?
want=0; bounded 30 "$native" enqueue --no-such-flag >/dev/null 2>&1 || want=$?
[ "$rc" -eq "$want" ] && [ "$rc" -ne 0 ] || fail "the launcher exited $rc where the binary exits $want"
echo "ok: a usage error exits $rc through the launcher, as from the binary"
fake='[["fake", ["/bin/echo", "{\"ok\": true}"]]]'
daemon_pid() {
  "$native" status --state-dir "$1" --json \
    | python3 -c 'import json, sys; d = json.load(sys.stdin)["daemon"]; print(d["pid"] if d["running"] else "")'
}
# `through_launcher SIGNAL TARGET EXPECTED_RC`: a daemon started through the launcher,
# ready once it judged a job; SIGNAL sent to TARGET (the launcher, or the daemon
# itself); the launcher must end with EXPECTED_RC and leave no daemon.
through_launcher() {
  local signal=$1 to=$2 expected=$3 state
  state=$(mktemp -d "$work/state.XXXXXX")
  # Started directly (not through a function), so $! is the launcher's own pid; the
  # alarm only ends a launcher that hangs.
  CATSTACK_LLM_JUDGE_RUNNERS=$fake perl -e 'alarm shift; exec { $ARGV[0] } @ARGV or die' \
    120 "$launcher" daemon --state-dir "$state" >"$state.log" 2>&1 &
  local pid=$!
  bounded 60 "$native" enqueue --state-dir "$state" --transcript ready --hit-if-all-true ok \
    --prompt 'Reply {"ok": true}' --wait 30 >/dev/null 2>>"$state.log" \
    || { cat "$state.log" >&2; fail "the daemon started through the launcher judged nothing"; }
  local daemon
  daemon=$(daemon_pid "$state")
  [ -n "$daemon" ] && [ "$daemon" != "$pid" ] || fail "no daemon under the launcher (pid '$daemon')"
  daemons+=("$daemon")
  if [ "$to" = launcher ]; then kill "-$signal" "$pid"; else kill "-$signal" "$daemon"; fi
  local rc=0
  wait "$pid" 2>/dev/null || rc=$?
  [ "$rc" -eq "$expected" ] || { cat "$state.log" >&2; fail "SIG$signal to the $to: the launcher exited $rc, not $expected"; }
  ! kill -0 "$daemon" 2>/dev/null || fail "SIG$signal to the $to: the daemon (pid $daemon) is still running"
  echo "ok: SIG$signal to the $to: the daemon stopped, the launcher exited $rc"
}
through_launcher TERM launcher 0
through_launcher INT launcher 0
through_launcher KILL daemon 137

step "npx: hooks install is refused"
refused npx "npm i -g $npm_name" npm exec "${npm_flags[@]}" --yes --package "${tarballs[0]}" --package "${tarballs[1]}" --

step "the launcher without its platform package (--omit=optional, offline)"
bounded 120 npm install -g --prefix "$work/npm-bare" "${npm_flags[@]}" --omit=optional "${tarballs[0]}"
rc=0; bounded 30 "$work/npm-bare/bin/llm-judge" --version >"$work/bare.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { cat "$work/bare.out" >&2; fail "the bare launcher exited $rc, not 1"; }
grep -qF "npm i -g $npm_name" "$work/bare.out" || { cat "$work/bare.out" >&2; fail "the bare launcher names no reinstall command"; }
grep -qF "$npm_name-$platform" "$work/bare.out" || fail "the bare launcher does not name the missing package"
echo "ok: exit 1, saying:"
sed 's/^/  /' "$work/bare.out"

printf '\ncheck-install: all passed in %d s\n' $((SECONDS - start))
