#!/usr/bin/env bash
# Rebuilds ../assets/plotly-partial.min.js from package.json and package-lock.json (exact
# versions: the same file, byte for byte). Needs node >= 18 and npm, and the npm registry.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here"/package.json "$here"/entry.js "$here"/build.mjs "$work"/
if [ -f "$here/package-lock.json" ]; then
    cp "$here/package-lock.json" "$work"/
    (cd "$work" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
else
    (cd "$work" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error)
    cp "$work/package-lock.json" "$here/"
fi
(cd "$work" && node build.mjs "$here/../assets/plotly-partial.min.js")
ls -l "$here/../assets/plotly-partial.min.js"
