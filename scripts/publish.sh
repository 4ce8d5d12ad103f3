#!/usr/bin/env bash
# Publishes the packages in DIR (the release workflow's last steps); --dry-run checks
# them and uploads nothing (scripts/check-packages.sh runs it so on every change).
#
#   scripts/publish.sh pypi DIR [--dry-run]  # every wheel, with uv publish: trusted
#                                            # publishing (OIDC) in GitHub Actions
#   scripts/publish.sh npm DIR [--dry-run]   # each platform package, then the launcher,
#                                            # with npm provenance
#
# The npm launcher goes last, so nobody installs a launcher whose platform packages are
# not there yet. No sdist is published (see pyproject.toml).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 2 ] || [ $# -gt 3 ] || { [ $# -eq 3 ] && [ "$3" != --dry-run ]; }; then
  echo "usage: $0 pypi|npm DIR [--dry-run]" >&2
  exit 2
fi
channel=$1 dir=$2 dry=${3:-}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
case $channel in
  pypi)
    tools=$("$root/scripts/package-tools.sh")
    wheels=()
    while IFS= read -r w; do wheels+=("$w"); done < <(find "$dir" -maxdepth 1 -name "llm_judge-$version-*.whl" | sort)
    [ ${#wheels[@]} -gt 0 ] || { echo "publish: no wheel of $version in $dir" >&2; exit 1; }
    if [ -n "$dry" ]; then
      "$tools/uv" publish --dry-run --trusted-publishing never "${wheels[@]}"
    else
      "$tools/uv" publish --trusted-publishing always "${wheels[@]}"
    fi
    ;;
  npm)
    name=$(node -p 'require(process.argv[1]).name' "$root/packaging/npm/llm-judge/package.json")
    base=${name#@}
    base=${base/\//-}
    launcher=$dir/$base-$version.tgz
    [ -f "$launcher" ] || { echo "publish: no $launcher" >&2; exit 1; }
    platforms=()
    while IFS= read -r t; do platforms+=("$t"); done < <(find "$dir" -maxdepth 1 -name "$base-*-$version.tgz" | sort)
    [ ${#platforms[@]} -gt 0 ] || { echo "publish: no platform package of $version in $dir" >&2; exit 1; }
    flags=(--access public --no-update-notifier)
    # A prerelease (0.2.0-rc.1) is not `latest`: npm i -g picks it only when asked.
    case $version in *-*) flags+=(--tag next) ;; esac
    if [ -n "$dry" ]; then flags+=(--dry-run --offline); else flags+=(--provenance); fi
    for tgz in "${platforms[@]}" "$launcher"; do
      echo "publish: $(basename "$tgz")"
      npm publish "${flags[@]}" "$tgz"
    done
    ;;
  *)
    echo "usage: $0 pypi|npm DIR [--dry-run]" >&2
    exit 2
    ;;
esac
