#!/usr/bin/env bash
# Installs opencode (the version the end-to-end tests are written against) into
# .cache/opencode-<version>/ with npm, unless it is already there, and prints the binary's path.
#
#   scripts/install_opencode.sh            # -> /…/.cache/opencode-1.18.33/node_modules/opencode-linux-x64/bin/opencode
#   OPENCODE_VERSION=1.18.33 OPENCODE_CACHE=/somewhere scripts/install_opencode.sh
#
# npm skips the postinstall of `opencode-ai`, so its bin/ wrapper does not work; the real binary is in
# the platform package that npm installs as an optional dependency (opencode-linux-x64 on x86_64,
# opencode-linux-arm64 on aarch64; not the -baseline or -musl variants).
set -euo pipefail
cd "$(dirname "$0")/.."

version=${OPENCODE_VERSION:-1.18.33}
cache=${OPENCODE_CACHE:-$PWD/.cache/opencode-$version}

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64 | Linux-amd64) platform=linux-x64 ;;
  Linux-aarch64 | Linux-arm64) platform=linux-arm64 ;;
  Darwin-x86_64) platform=darwin-x64 ;;
  Darwin-arm64) platform=darwin-arm64 ;;
  *)
    echo "install_opencode.sh: no opencode build known for $(uname -s) $(uname -m)" >&2
    exit 1
    ;;
esac
binary=$cache/node_modules/opencode-$platform/bin/opencode

works() {
  # The package's manifest, not `opencode --version` (which takes a second).
  [ -x "$binary" ] && grep -q "\"version\": *\"$version\"" "${binary%/bin/opencode}/package.json" 2>/dev/null
}

if ! works; then
  if ! command -v npm >/dev/null; then
    echo "install_opencode.sh: npm is needed to install opencode-ai@$version" >&2
    exit 1
  fi
  mkdir -p "$cache"
  # Several test sessions may start at once: one installs, the others wait for it.
  exec 9>"$cache/.install.lock"
  flock 9
  if ! works; then
    echo "installing opencode-ai@$version into $cache" >&2
    npm install --no-audit --no-fund --loglevel=error --prefix "$cache" "opencode-ai@$version" >&2
    if ! works || [ "$("$binary" --version 2>/dev/null)" != "$version" ]; then
      echo "install_opencode.sh: $binary missing, broken or not version $version after npm install" >&2
      exit 1
    fi
  fi
fi
echo "$binary"
