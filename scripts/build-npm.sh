#!/usr/bin/env bash
# Packs the npm packages into OUTDIR: the launcher (@llm-judge/llm-judge, from
# packaging/npm/llm-judge) and this platform's package carrying the native binary
# (@llm-judge/llm-judge-<os>-<cpu>, chosen by npm through `os` and `cpu`), both at
# Cargo.toml's version. Prints the two tarballs' paths, launcher first.
#
#   scripts/build-npm.sh OUTDIR              # the binary of the wheel in OUTDIR
#   scripts/build-npm.sh OUTDIR BINARY       # this binary
#
# One build feeds both channels: without BINARY the binary is taken out of the wheel
# scripts/build-wheel.sh wrote into OUTDIR for this platform (built first when there is
# none). LLM_JUDGE_NPM_PLATFORM=<os>-<cpu> (node's names: linux-x64, linux-arm64,
# darwin-x64, darwin-arm64) packs another platform's binary, for the release workflow.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 OUTDIR [BINARY]" >&2
  exit 2
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
binary=${2:-}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
platform=${LLM_JUDGE_NPM_PLATFORM:-$(node -p 'process.platform + "-" + process.arch')}
case $platform in
  linux-x64) wheel_tag=x86_64 ;;
  linux-arm64) wheel_tag=aarch64 ;;
  darwin-x64) wheel_tag="macosx_*_x86_64" ;;
  darwin-arm64) wheel_tag="macosx_*_arm64" ;;
  *) echo "build-npm: no package for the platform $platform" >&2; exit 1 ;;
esac
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
if [ -z "$binary" ]; then
  wheel=$(find "$out" -maxdepth 1 -name "llm_judge-$version-*$wheel_tag.whl" | head -n 1)
  if [ -z "$wheel" ]; then
    echo "build-npm: no $platform wheel of $version in $out: building it" >&2
    wheel=$("$root/scripts/build-wheel.sh" "$out")
  fi
  echo "build-npm: the binary of $(basename "$wheel")" >&2
  python3 -m zipfile -e "$wheel" "$stage/wheel"
  binary=$(echo "$stage"/wheel/llm_judge-*.data/scripts/llm-judge)
fi
[ -f "$binary" ] || { echo "build-npm: no binary at $binary" >&2; exit 1; }

# The launcher: its package.json names the package (the one place of the npm name)
# and lists the platform packages; both get this version.
mkdir -p "$stage/launcher/bin" "$stage/platform/bin"
cp "$root/packaging/npm/llm-judge/bin/llm-judge.js" "$stage/launcher/bin/"
cp "$root/packaging/README.md" "$root/LICENSE" "$stage/launcher/"
cp "$root/packaging/README.md" "$root/LICENSE" "$stage/platform/"
cp "$binary" "$stage/platform/bin/llm-judge"
chmod 0755 "$stage/launcher/bin/llm-judge.js" "$stage/platform/bin/llm-judge"
VERSION=$version PLATFORM=$platform SRC="$root/packaging/npm/llm-judge/package.json" STAGE=$stage node -e '
const fs = require("fs");
const { VERSION, PLATFORM, SRC, STAGE } = process.env;
const launcher = JSON.parse(fs.readFileSync(SRC, "utf8"));
launcher.version = VERSION;
for (const dep of Object.keys(launcher.optionalDependencies)) {
  launcher.optionalDependencies[dep] = VERSION;
}
const name = `${launcher.name}-${PLATFORM}`;
if (!(name in launcher.optionalDependencies)) {
  throw new Error(`${name} is not among the launcher'"'"'s optionalDependencies`);
}
const [os, cpu] = PLATFORM.split("-");
const platform = {
  name,
  version: VERSION,
  description: `The llm-judge binary for ${os} ${cpu} (installed by ${launcher.name})`,
  license: launcher.license,
  os: [os],
  cpu: [cpu],
  files: ["bin/llm-judge"],
};
// The Linux binary needs glibc 2.28 or later: npm leaves it out on musl.
if (os === "linux") platform.libc = ["glibc"];
// npm provenance requires repository.url to be the repository that built the package:
// in GitHub Actions it is named here from the variables of the run.
if (process.env.GITHUB_REPOSITORY && process.env.GITHUB_SERVER_URL) {
  const url = `git+${process.env.GITHUB_SERVER_URL}/${process.env.GITHUB_REPOSITORY}.git`;
  launcher.repository = platform.repository = { type: "git", url };
}
fs.writeFileSync(`${STAGE}/launcher/package.json`, JSON.stringify(launcher, null, 2) + "\n");
fs.writeFileSync(`${STAGE}/platform/package.json`, JSON.stringify(platform, null, 2) + "\n");
'
for part in launcher platform; do
  (cd "$stage/$part" && npm pack --silent --pack-destination "$out" >/dev/null)
done
scope_name=$(node -p 'require(process.argv[1]).name.replace(/^@/, "").replace("/", "-")' "$root/packaging/npm/llm-judge/package.json")
for tgz in "$out/$scope_name-$version.tgz" "$out/$scope_name-$platform-$version.tgz"; do
  [ -f "$tgz" ] || { echo "build-npm: npm pack wrote no $tgz" >&2; exit 1; }
  echo "$tgz"
done
