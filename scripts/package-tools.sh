#!/usr/bin/env bash
# The packaging tools at the versions pinned in packaging/requirements-tools.txt
# (maturin, ziglang, cargo-zigbuild, uv, pipx), in a venv of their own:
# $LLM_JUDGE_TOOLS, else $CARGO_TARGET_DIR/package-tools, else target/package-tools.
# Installed once, again only when the pins change. Prints the venv's bin folder.
#
#   PATH="$(scripts/package-tools.sh):$PATH"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pins=$root/packaging/requirements-tools.txt
target=${CARGO_TARGET_DIR:-$root/target}
venv=${LLM_JUDGE_TOOLS:-$target/package-tools}
case $venv in /*) ;; *) venv=$root/$venv ;; esac
if ! cmp -s "$pins" "$venv/.pins" 2>/dev/null; then
  echo "package-tools: installing the pinned tools into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$pins" >&2
  cp "$pins" "$venv/.pins"
fi
echo "$venv/bin"
