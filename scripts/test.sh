#!/usr/bin/env bash
# Set up (with the browser) and run every vramscope check; ends with one line
# `N passed, N failed` totalling all suites, and exits non-zero if anything failed.
#
# Suites: setup, lint (eslint, prettier, stylelint, ruff check, ruff format, mypy: one test
# each), version (Python __version__ == package.json), wheel (built wheel carries the
# labextension), jest, pytest (test/python), demo notebook (examples/demo.ipynb via nbclient),
# ui (galata/playwright in system chromium against a real JupyterLab).
#
# Environment: VRAMSCOPE_SKIP="ui demo" skips suites by name; PYTEST_ARGS adds pytest args.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
RESULTS=$ROOT/test-results
rm -rf "$RESULTS"
mkdir -p "$RESULTS"

export CI=${CI:-}
export PIP_RETRIES=0 PIP_DISABLE_PIP_VERSION_CHECK=1
export npm_config_update_notifier=false
export PYTHONDONTWRITEBYTECODE=1

PASSED=0
FAILED=0
SUMMARY=()
T_ALL=$(date +%s)

# record <suite> <passed> <failed> <seconds> [note]
record() {
  PASSED=$((PASSED + $2))
  FAILED=$((FAILED + $3))
  SUMMARY+=("$(printf '%-10s %4d passed %4d failed %5ss %s' "$1" "$2" "$3" "$4" "${5:-}")")
  printf '\n[test] suite %s done in %ss: passed %d, failed %d %s\n' "$1" "$4" "$2" "$3" "${5:-}"
}

# run_check <suite> <note> <command...>: a suite of one test that passes when the command does.
run_check() {
  local suite=$1 note=$2 t
  shift 2
  banner "$suite"
  t=$(date +%s)
  if "$@" </dev/null; then
    record "$suite" 1 0 $(($(date +%s) - t)) "$note"
  else
    record "$suite" 0 1 $(($(date +%s) - t)) "$note"
  fi
}

skipped() { [[ " ${VRAMSCOPE_SKIP:-} " == *" $1 "* ]]; }

banner() { printf '\n==================== %s ====================\n' "$1"; }

# ---- setup --------------------------------------------------------------------------------
run_check setup "" bash scripts/setup.sh --with-browser
export PATH="$ROOT/.venv/bin:$ROOT/node_modules/.bin:$PATH"
export VIRTUAL_ENV=$ROOT/.venv
PY=$ROOT/.venv/bin/python
[ -x "$PY" ] || PY=python3

# ---- lint: each tool counts as one test ----------------------------------------------------
banner lint
t=$(date +%s)
lp=0
lf=0
failed_tools=()
lint_tool() {
  local name=$1
  shift
  echo "--- $name: $*"
  if "$@" </dev/null; then
    lp=$((lp + 1))
  else
    lf=$((lf + 1))
    failed_tools+=("$name")
  fi
}
lint_tool eslint npm run -s eslint:check
lint_tool prettier npm run -s prettier:check
lint_tool stylelint npm run -s stylelint:check
lint_tool ruff-check "$PY" -m ruff check .
lint_tool ruff-format "$PY" -m ruff format --check .
lint_tool mypy "$PY" -m mypy
record lint $lp $lf $(($(date +%s) - t)) "${failed_tools[*]:+(failed: ${failed_tools[*]})}"

# ---- version: Python __version__ equals package.json's ------------------------------------------
check_version() {
  "$PY" - <<'EOF'
import json
import vramscope
want = json.load(open("package.json"))["version"]
got = vramscope.__version__
print(f"package.json {want}  vramscope.__version__ {got}")
raise SystemExit(0 if got == want else 1)
EOF
}
run_check version "" check_version

# ---- wheel: the user install path carries the prebuilt labextension ---------------------------
check_wheel() {
  local dir=$RESULTS/wheel
  "$PY" -m pip wheel --retries 0 -q --no-deps --no-build-isolation -w "$dir" . || return 1
  "$PY" - "$dir" <<'EOF'
import glob, json, sys, zipfile
whl = glob.glob(sys.argv[1] + "/vramscope-*.whl")[0]
names = zipfile.ZipFile(whl).namelist()
version = json.load(open("package.json"))["version"]
ext = f"vramscope-{version}.data/data/share/jupyter/labextensions/jupyterlab-vramscope/"
need = [ext + "package.json", ext + "install.json", "vramscope/__init__.py"]
missing = [n for n in need if n not in names]
if not any(n.startswith(ext + "static/remoteEntry.") for n in names):
    missing.append(ext + "static/remoteEntry.*.js")
print(whl, f"({len(names)} files)")
if missing:
    print("missing from the wheel:", *missing, sep="\n  ")
raise SystemExit(1 if missing else 0)
EOF
}
run_check wheel "" check_wheel

# ---- jest -------------------------------------------------------------------------------------
banner jest
t=$(date +%s)
JEST_JSON=$RESULTS/jest.json
npx jest --coverage=false --passWithNoTests --ci --json --outputFile="$JEST_JSON" </dev/null
jest_rc=$?
read -r jp jf < <(node -e '
  try {
    const r = require(process.argv[1]);
    const broken = r.numRuntimeErrorTestSuites || 0;
    console.log(r.numPassedTests, r.numFailedTests + broken);
  } catch (e) { console.log("0 1"); }' "$JEST_JSON")
if [ "$jest_rc" != 0 ] && [ "$jf" = 0 ]; then jf=1; fi
record jest "$jp" "$jf" $(($(date +%s) - t))

# ---- pytest -----------------------------------------------------------------------------------
banner pytest
t=$(date +%s)
PYTEST_XML=$RESULTS/pytest.xml
# shellcheck disable=SC2086
"$PY" -m pytest test/python -q -rfE --junitxml="$PYTEST_XML" ${PYTEST_ARGS:-} </dev/null
py_rc=$?
if [ "$py_rc" = 5 ]; then
  record pytest 0 0 $(($(date +%s) - t)) "(no tests collected)"
else
  read -r pp pf ps < <("$PY" - "$PYTEST_XML" <<'EOF'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception:
    print(0, 1, 0)
    raise SystemExit
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
tests = sum(int(s.get("tests", 0)) for s in suites)
bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
skip = sum(int(s.get("skipped", 0)) for s in suites)
print(tests - bad - skip, bad, skip)
EOF
  )
  if [ "$py_rc" != 0 ] && [ "$pf" = 0 ]; then pf=1; fi
  record pytest "$pp" "$pf" $(($(date +%s) - t)) "(${ps} skipped)"
fi

# ---- demo notebook executes headless ---------------------------------------------------------------
check_demo() {
  "$PY" - examples/demo.ipynb <<'EOF'
import sys
import time

import nbformat
from nbclient import NotebookClient

path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
nbformat.validate(nb)
start = time.time()
# Cells tagged raises-exception (the deliberate failure) may error; any other error fails.
NotebookClient(nb, timeout=300, kernel_name="python3",
               resources={"metadata": {"path": "examples"}}).execute()
print(f"{path}: {len(nb.cells)} cells executed in {time.time() - start:.1f} s")
EOF
}
if skipped demo; then
  record demo 0 0 0 "(skipped by VRAMSCOPE_SKIP)"
else
  run_check demo "(examples/demo.ipynb)" check_demo
fi

# ---- UI tests (galata + system chromium) ---------------------------------------------------------
if skipped ui; then
  record ui 0 0 0 "(skipped by VRAMSCOPE_SKIP)"
else
  banner ui
  t=$(date +%s)
  PW_JSON=$RESULTS/playwright.json
  PLAYWRIGHT_JSON_OUTPUT_NAME=$PW_JSON npx playwright test -c ui-tests/playwright.config.ts \
    --reporter=list,json </dev/null
  ui_rc=$?
  read -r up uf < <(node -e '
    try {
      const s = require(process.argv[1]).stats;
      const errors = (require(process.argv[1]).errors || []).length;
      console.log(s.expected + s.flaky, s.unexpected + errors);
    } catch (e) { console.log("0 1"); }' "$PW_JSON")
  if [ "$ui_rc" != 0 ] && [ "$uf" = 0 ]; then uf=1; fi
  record ui "$up" "$uf" $(($(date +%s) - t))
fi

# ---- total ------------------------------------------------------------------------------------
banner summary
printf '%s\n' "${SUMMARY[@]}"
echo "total time: $(($(date +%s) - T_ALL)) s"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
