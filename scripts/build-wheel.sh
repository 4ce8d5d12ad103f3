#!/usr/bin/env bash
# Builds the llm-judge wheel with maturin (bindings = "bin": the binary alone, in the
# environment's bin/) into OUTDIR, and prints the wheel's path (only that, on stdout).
#
#   scripts/build-wheel.sh OUTDIR                       # release, for this platform
#   scripts/build-wheel.sh --profile dev OUTDIR         # what CI checks (faster build)
#   scripts/build-wheel.sh --target aarch64-unknown-linux-gnu OUTDIR
#   scripts/build-wheel.sh --host target/wheels         # packs `cargo build --release`'s
#                                                       # binary as it is, for this machine
#
# On Linux the binary is linked against glibc 2.28 with zig (cargo-zigbuild), the wheel
# is tagged manylinux_2_28, and scripts/check-glibc-floor.sh checks the binary. With
# --host it is linked as `cargo build` links it (this machine's glibc, tag linux_*):
# maturin then reuses target/<profile>/, so right after `cargo build --release` it
# takes seconds. Tools: scripts/package-tools.sh (pinned). The build uses
# $CARGO_TARGET_DIR (else target/) and -j $CARGO_BUILD_JOBS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
profile=release target="" host=false out=""
while [ $# -gt 0 ]; do
  case $1 in
    --profile) profile=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --host) host=true; shift ;;
    -*) echo "usage: $0 [--profile dev|release] [--target TRIPLE] [--host] OUTDIR" >&2; exit 2 ;;
    *) out=$1; shift ;;
  esac
done
[ -n "$out" ] || { echo "usage: $0 [--profile dev|release] [--target TRIPLE] [--host] OUTDIR" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ "$(uname -s)" = Linux ] && ! $host; then
  tools=$("$root/scripts/package-tools.sh")
else
  tools=$("$root/scripts/package-tools.sh" --only maturin)  # no zig needed
fi
export PATH="$tools:$PATH"
floor=2.28
args=(build --manifest-path "$root/Cargo.toml" --profile "$profile" --out "$out")
if [ "$(uname -s)" = Linux ] && ! $host; then
  [ -n "$target" ] || target="$(uname -m)-unknown-linux-gnu"
  # --strip: a dev build is not stripped by its profile (the release profile strips).
  args+=(--target "$target" --zig --compatibility "manylinux_${floor/./_}" --strip true)
else
  [ -z "$target" ] || args+=(--target "$target")
  # As built: the profile decides (release strips); the tag says this machine's libc.
  args+=(--strip false)
  [ "$(uname -s)" != Linux ] || args+=(--compatibility linux)
fi
# Only this build's wheel is printed: others in OUTDIR (another platform's) stay.
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT
echo "build-wheel: maturin ${args[*]}" >&2
maturin "${args[@]}" >&2
wheel=$(find "$out" -maxdepth 1 -name 'llm_judge-*.whl' -newer "$stamp" | head -n 1)
[ -n "$wheel" ] || { echo "build-wheel: maturin wrote no wheel into $out" >&2; exit 1; }
if [ "$(uname -s)" = Linux ] && ! $host; then
  # The floor, guarded: the tag, and no symbol newer than it in the binary.
  case $(basename "$wheel") in
    *-manylinux_2_28_*.whl | *-manylinux_2_17_*.whl | *manylinux2014_*.whl) ;;
    *) echo "build-wheel: $(basename "$wheel") is not tagged manylinux_2_28 or lower" >&2; exit 1 ;;
  esac
  unpacked=$(mktemp -d)
  trap 'rm -f "$stamp"; rm -rf "$unpacked"' EXIT
  python3 -m zipfile -e "$wheel" "$unpacked"
  "$root/scripts/check-glibc-floor.sh" "$unpacked"/llm_judge-*.data/scripts/llm-judge "$floor" >&2
fi
echo "$wheel"
