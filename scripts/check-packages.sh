#!/usr/bin/env bash
# The packages, proven on this machine (docs/install.md; .ci/run runs it after the
# tests), with the scripts the release workflow runs: builds this platform's wheel with
# maturin (dev profile for speed; on Linux linked against glibc 2.28 with zig, its tag
# and symbols checked against that floor), packs the npm packages from the same binary,
# installs and checks both (scripts/check-install.sh), and runs the publish steps dry.
# Packages land in $CARGO_TARGET_DIR/packages (else target/packages).
#
#   scripts/check-packages.sh          # 3.5 minutes from a cold target/, 35 s warm
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
start=$SECONDS
step() { printf '\n== check-packages: %s (%d s in)\n' "$*" $((SECONDS - start)); }

step "the version: Cargo.toml and Cargo.lock agree"
"$root/scripts/check-version.sh"

step "the pinned tools (packaging/requirements-tools.txt)"
tools=$("$root/scripts/package-tools.sh")
export PATH="$tools:$PATH"
echo "maturin $(maturin --version | cut -d' ' -f2), zig $(python-zig version), cargo-zigbuild $(cargo-zigbuild --version | cut -d' ' -f2), $(uv --version), pipx $(pipx --version), node $(node --version), npm $(npm --version)"
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
out=$target/packages
rm -rf "$out"
mkdir -p "$out"

step "the wheel: maturin, dev profile (on Linux: zig, manylinux_2_28)"
wheel=$("$root/scripts/build-wheel.sh" --profile dev "$out")
echo "$(basename "$wheel"): $(du -k "$wheel" | cut -f1) KiB"

step "the npm packages, from the wheel's binary"
"$root/scripts/build-npm.sh" "$out"

"$root/scripts/check-install.sh" "$out"

step "the publish steps, dry (nothing is uploaded)"
"$root/scripts/publish.sh" pypi "$out" --dry-run
"$root/scripts/publish.sh" npm "$out" --dry-run

printf '\ncheck-packages: all passed in %d s (packages in %s)\n' $((SECONDS - start)) "$out"
