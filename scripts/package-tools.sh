#!/usr/bin/env bash
# The packaging tools at the versions pinned in packaging/requirements-tools.txt
# (maturin, ziglang, cargo-zigbuild, uv, pipx), in a venv of their own:
# $LLM_JUDGE_TOOLS, else $CARGO_TARGET_DIR/package-tools, else target/package-tools.
# Installed once, again only when the pins change. Prints the venv's bin folder.
#
#   PATH="$(scripts/package-tools.sh):$PATH"
#   scripts/package-tools.sh --only maturin    # just maturin (its pin), in package-tools-maturin
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pins=$root/packaging/requirements-tools.txt
target=${CARGO_TARGET_DIR:-$root/target}
venv=${LLM_JUDGE_TOOLS:-$target/package-tools}
case $venv in /*) ;; *) venv=$root/$venv ;; esac
wanted=$(grep -v '^#' "$pins" | grep .)
if [ "${1:-}" = --only ]; then
  [ $# -eq 2 ] || { echo "usage: $0 [--only TOOL]" >&2; exit 2; }
  wanted=$(printf '%s\n' "$wanted" | grep "^$2==") || { echo "package-tools: no pin for $2 in $pins" >&2; exit 2; }
  venv=$venv-$2
fi
if [ "$(cat "$venv/.pins" 2>/dev/null)" != "$wanted" ]; then
  echo "package-tools: installing $(echo "$wanted" | tr '\n' ' ')into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  # shellcheck disable=SC2086 # one requirement a word
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $wanted >&2
  printf '%s\n' "$wanted" >"$venv/.pins"
fi
echo "$venv/bin"
