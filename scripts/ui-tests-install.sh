#!/usr/bin/env bash
# Installs what scripts/ui-tests.sh needs when it is missing: Debian's
# chromium and ui-tests/'s node modules (playwright-core, `npm ci`).
# Idempotent. `.ci/run` starts it in the background at the beginning, so the
# download and unpacking overlap the build; ui-tests.sh runs it again (a
# no-op when the first run finished).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null; then
  echo "== installing chromium (Debian)"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  ($sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null) \
    || { echo "chromium is missing and could not be installed" >&2; exit 1; }
fi
if [ ! -f ui-tests/node_modules/.package-lock.json ] \
  || [ ui-tests/package-lock.json -nt ui-tests/node_modules/.package-lock.json ]; then
  echo "== ui-tests: npm ci"
  (cd ui-tests && npm ci --no-audit --no-fund --silent)
fi
