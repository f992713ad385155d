#!/usr/bin/env bash
# Installs what `make test-mcp` runs into .cache/mcp-npm (gitignored): the pinned packages of
# tests_mcp/npm/package.json (reference servers, the conformance framework, and Node 22 as
# an npm package, for the framework; nothing system-wide). Reruns only when the pins change.
set -euo pipefail
cd "$(dirname "$0")/.."
target=.cache/mcp-npm
if [ -f "$target/.installed" ] && cmp -s tests_mcp/npm/package-lock.json "$target/.installed"; then
  exit 0
fi
mkdir -p "$target"
cp tests_mcp/npm/package.json tests_mcp/npm/package-lock.json "$target/"
(cd "$target" && npm ci --no-audit --no-fund --loglevel=error)
cp tests_mcp/npm/package-lock.json "$target/.installed"
