#!/usr/bin/env bash
# Checks that a release tag names Cargo.toml's version (v<version>) and that Cargo.lock
# says the same; prints the version. Every package's version comes from Cargo.toml
# (the wheel through maturin, the npm packages through scripts/build-npm.sh).
#
#   scripts/check-version.sh v0.1.0       # the release workflow, with its tag
#   scripts/check-version.sh              # CI: Cargo.toml and Cargo.lock agree
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
[ -n "$version" ] || { echo "check-version: no version in Cargo.toml" >&2; exit 1; }
tag=${1:-v$version}
if [ "$tag" != "v$version" ]; then
  echo "check-version: the tag $tag is not v$version, Cargo.toml's version" >&2
  exit 1
fi
locked=$(awk '/^name = "llm-judge"$/ {getline; sub(/^version = "/, ""); sub(/"$/, ""); print; exit}' "$root/Cargo.lock")
if [ "$locked" != "$version" ]; then
  echo "check-version: Cargo.lock has llm-judge $locked, Cargo.toml $version (run cargo build)" >&2
  exit 1
fi
echo "$version"
