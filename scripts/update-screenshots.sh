#!/usr/bin/env bash
# Refresh the README's screenshots (docs/images/*.png) from the browser tests that take them.
#
#   bash scripts/update-screenshots.sh            # every spec that takes a README screenshot
#   bash scripts/update-screenshots.sh insight    # only specs whose file name matches
#
# An ordinary test run (scripts/test.sh, npx playwright test) writes its screenshots under
# test-results/screenshots/ and leaves docs/images/ alone; this script runs the same tests with
# VRAMSCOPE_UPDATE_SCREENSHOTS=1, which points ui-tests/tests/utils.ts screenshotPath() at
# docs/images/. Review the images (git diff --stat docs/images) and commit them when the
# panel's look changed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)

bash scripts/setup.sh --with-browser
export PATH="$ROOT/.venv/bin:$ROOT/node_modules/.bin:$PATH"
export PIP_RETRIES=0
# README's pictures show the kernels users start: cold, the bridge loaded before torch (the
# browser tests' warm kernels, test/warm_kernels, have torch imported before it)
export VRAMSCOPE_COLD_KERNELS=1

# The specs that call screenshotPath(), optionally filtered by the arguments: README's own
# (demo-250.png, demo-wide.png) come from demoflow.spec.ts, README's demo flow
# (`bash scripts/update-screenshots.sh demoflow`).
mapfile -t SPECS < <(grep -l 'screenshotPath(' ui-tests/tests/*.spec.ts | xargs -n1 basename)
if [ $# -gt 0 ]; then
  pattern=$(IFS='|'; echo "$*")
  mapfile -t SPECS < <(printf '%s\n' "${SPECS[@]}" | grep -E "$pattern" || true)
fi
if [ ${#SPECS[@]} = 0 ]; then
  echo "[screenshots] no spec takes a README screenshot${1:+ matching $*}" >&2
  exit 1
fi

echo "[screenshots] running: ${SPECS[*]}"
VRAMSCOPE_UPDATE_SCREENSHOTS=1 npx playwright test -c ui-tests/playwright.config.ts --no-deps \
  "${SPECS[@]}"
echo "[screenshots] updated:"
git status --short docs/images
