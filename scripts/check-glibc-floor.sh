#!/usr/bin/env bash
# Fails when BINARY needs a glibc symbol version newer than FLOOR (say 2.28, RHEL 8's),
# naming each such symbol; prints the newest version it needs. Reads the dynamic symbol
# table with objdump (binutils).
#
#   scripts/check-glibc-floor.sh target/x86_64-unknown-linux-gnu/release/llm-judge 2.28
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BINARY FLOOR (e.g. 2.28)" >&2
  exit 2
fi
binary=$1 floor=$2
symbols=$(objdump -T "$binary") || { echo "check-glibc-floor: objdump cannot read $binary" >&2; exit 1; }
# Lines such as: 0000 DF *UND* 0000 (GLIBC_2.28) fcntl64   (or GLIBC_2.2.5 without parentheses)
versions=$(printf '%s\n' "$symbols" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -u -V)
if [ -z "$versions" ]; then
  echo "check-glibc-floor: $binary names no glibc symbol version (static, or not a glibc binary)" >&2
  exit 1
fi
newest=$(printf '%s\n' "$versions" | tail -n 1)
above=()
while read -r v; do
  [ "$(printf '%s\n%s\n' "$v" "$floor" | sort -V | tail -n 1)" = "$floor" ] || above+=("$v")
done <<<"$versions"
if [ ${#above[@]} -gt 0 ]; then
  echo "check-glibc-floor: FAIL: $binary needs glibc $newest, above the floor $floor:" >&2
  for v in "${above[@]}"; do
    printf '%s\n' "$symbols" | grep -F "GLIBC_$v)" | awk '{print "  " $NF " (GLIBC_'"$v"')"}' >&2 || true
  done
  exit 1
fi
echo "check-glibc-floor: ok: $binary needs glibc $newest at most (floor $floor)"
