#!/usr/bin/env bash
# Set up (with the browser) and run every vramscope check; ends with one line
# `N passed, N failed` totalling all suites, and exits non-zero if anything failed.
#
# Suites: setup, lint (eslint, prettier, stylelint, ruff check, ruff format, mypy: one test
# each), version (Python __version__ == package.json), wheel (built wheel carries the
# labextension, and installed on its own `jupyter labextension list` shows it enabled OK),
# jest, pytest (test/python on three workers, but for the tests marked apart), pytest-apart
# (those, after it, on two workers of their own), cuda (`pytest -m cuda`, only where torch
# sees a CUDA device), cuda-check (scripts/cuda-check.sh: without CUDA its dry run, which must
# find none and say so),
# demo notebook (examples/demo.ipynb via nbclient, in under DEMO_LIMIT_S seconds), ui
# (galata/playwright in Debian's chromium-headless-shell against a real JupyterLab, on two
# workers).
# Side by side, where the cores would otherwise wait: mypy and the import of what the warm-kernel
# zygote preloads beside npm's install once the venv is ready, jest beside setup's front-end
# build, the zygote's start beside setup's last checks; niced (nice 10), lint beside the apart
# tests, the wheel and cuda-check's dry run beside the browser tests' start.
#
# A suite that ran nothing fails: pytest's exit code 5 (no tests collected), a jest or pytest
# run with no test passed, and skipped Playwright tests each count as failures.
#
# Environment: VRAMSCOPE_SKIP="ui demo" skips suites by name (setup, lint, version and wheel
# always run); PYTEST_ARGS adds arguments to the pytest suite (not to the cuda suite) and runs
# it in one process, the apart tests included (no pytest-apart suite).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$(pwd)
RESULTS=$ROOT/test-results
rm -rf "$RESULTS"
mkdir -p "$RESULTS"

export CI=${CI:-}
export PIP_RETRIES=0 PIP_DISABLE_PIP_VERSION_CHECK=1
export npm_config_update_notifier=false
# Python writes each module's .pyc as it is first imported: setup installs the packages without
# compiling them (--lazy-bytecode), which saves ~50 s of CPU on ~13,500 files where the tests
# import a few thousand. (__pycache__/ is ignored by git and left out of the wheel.)
unset PYTHONDONTWRITEBYTECODE
# IPython's folder for every kernel and shell the suites start: this run's, never the user's
# ~/.ipython (whose history database each of the ~10,000 test cells would be written into, and
# whose startup files and config would run in the tests' kernels).
export IPYTHONDIR=$RESULTS/ipython

DEMO_LIMIT_S=60 # the demo notebook must run on CPU in under a minute

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

# ---- side by side: suites that keep at most one of the two cores busy for much of their time
# run in the background beside others; their output is printed, and their results recorded,
# once they are waited for (measured per second on 2 cores: the front-end build and the
# labextension check at the end of setup ~55% busy, pytest's two workers ~85%) --------------
declare -A BG_PIDS
DEPS_READY=$RESULTS/deps-ready # created by setup.sh once the venv and node_modules are ready
SETUP_DONE=$RESULTS/setup-done
VENV_READY=$RESULTS/venv-ready # created by setup.sh once the venv is ready
# background [--after-deps|--after-venv] <name> <command...>: run it with its output to
# $RESULTS/<name>.log; with --after-deps, once setup has the venv and node_modules, with
# --after-venv once it has the venv (or not at all, if setup ended without them). Its time
# counts from when it starts.
background() {
  local ready=
  case "$1" in
    --after-deps) ready=$DEPS_READY ;;
    --after-venv) ready=$VENV_READY ;;
  esac
  if [ -n "$ready" ]; then
    shift
  fi
  local name=$1
  shift
  (
    if [ -n "$ready" ]; then
      until [ -e "$ready" ] || [ -e "$SETUP_DONE" ]; do
        kill -0 "$$" 2>/dev/null || exit 1 # this script ended (killed) meanwhile
        sleep 0.5
      done
      if [ ! -e "$ready" ]; then
        echo "not run: setup ended without what it needs ($(basename "$ready"))" >"$RESULTS/$name.log"
        echo "1 0" >"$RESULTS/$name.status"
        exit
      fi
    fi
    t0=$(date +%s)
    "$@" </dev/null >"$RESULTS/$name.log" 2>&1
    echo "$? $(($(date +%s) - t0))" >"$RESULTS/$name.status"
  ) &
  BG_PIDS[$name]=$!
}
# niced <command...>: run it at a lower priority (nice 10: ~1/10 of a core where a test wants it
# too), for the background jobs that fill the cores' idle time beside timing-sensitive suites
niced() {
  renice -n 10 -p "$BASHPID" >/dev/null
  "$@"
}
# collect <name>: wait for it and print its output; sets BG_RC (its exit status) and BG_SECONDS
collect() {
  wait "${BG_PIDS[$1]}"
  unset 'BG_PIDS[$1]'
  cat "$RESULTS/$1.log"
  read -r BG_RC BG_SECONDS <"$RESULTS/$1.status" || {
    BG_RC=1
    BG_SECONDS=0
  }
}
# The script ended early (interrupted, killed, or a bug): end the background jobs not collected
# yet and what they started (they ignore the SIGINT that reaches this script), instead of
# leaving them to write into the next run's test-results.
kill_tree() {
  local child
  for child in $(pgrep -P "$1"); do kill_tree "$child"; done
  kill "$1" 2>/dev/null
}
stop_background() {
  local pid
  for pid in "${BG_PIDS[@]}"; do kill_tree "$pid"; done
}
trap stop_background EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# run_collected <suite> <note>: record background job <suite> as a suite of one test
run_collected() {
  banner "$1"
  collect "$1"
  record "$1" $((BG_RC == 0 ? 1 : 0)) $((BG_RC == 0 ? 0 : 1)) "$BG_SECONDS" "$2"
}

# ---- warm kernels: one zygote (test/warm_kernels/zygote.py: kernels forked with torch
# imported) for pytest's suites and the browser tests, instead of one started by each (torch and
# torch._dynamo imported once, not three times: 5-6 CPU-s and 5-8 s at the start of each suite).
# Started during setup, once vramscope is installed (the zygote's sys.path must be the kernels'),
# and waited for before pytest; what it imports is imported once before (`--preload`), once
# the venv is ready, so that the bytecode setup did not write is written while npm installs
# (the zygote's own start took 17 s of one core after setup that way). Its environment goes to
# those suites only (warm_env): the demo notebook runs in a cold kernel, as a user's. One torch
# thread per kernel, as each suite asks for its own.
INSTALLED=$RESULTS/installed # created by setup.sh once vramscope is installed
WARM_ENV=()
ZYGOTE_PID=
start_zygote() {
  local dir
  [ "${VRAMSCOPE_COLD_KERNELS:-}" = 1 ] && return
  background --after-venv preload "$ROOT/.venv/bin/python" test/warm_kernels/zygote.py --preload
  dir=$(mktemp -d "${TMPDIR:-/tmp}/vramscope-warm-kernels-XXXXXX") || return
  (
    until [ -e "$INSTALLED" ]; do
      [ -e "$SETUP_DONE" ] && exit 1 # setup ended without installing it
      kill -0 "$$" 2>/dev/null || exit 1 # this script ended (killed) meanwhile
      sleep 0.5
    done
    OMP_NUM_THREADS=1 exec "$ROOT/.venv/bin/python" test/warm_kernels/zygote.py \
      --start "$dir" --watch-pid $$ </dev/null >"$RESULTS/zygote-env.json" 2>"$RESULTS/zygote-start.log"
  ) &
  ZYGOTE_PID=$!
}
# use_zygote: wait until it serves (or failed: then each suite starts its own), and set WARM_ENV
use_zygote() {
  [ -n "$ZYGOTE_PID" ] || return 0
  collect preload >/dev/null
  wait "$ZYGOTE_PID" || return 0
  ZYGOTE_PID=
  local json
  json=$(cat "$RESULTS/zygote-env.json") || return 0
  mapfile -t WARM_ENV < <("$PY" -c '
import json, sys
for name, value in json.loads(sys.argv[1]).items():
    print(f"{name}={value}")' "$json")
  WARM_ENV+=(OMP_NUM_THREADS=1 "VRAMSCOPE_UI_WARM_KERNELS_ENV=$json")
}
# warm_env <command...>: run it with the zygote's environment
warm_env() { env "${WARM_ENV[@]}" "$@"; }

# ---- setup, with mypy, jest and the zygote beside it ------------------------------------------
JEST_JSON=$RESULTS/jest.json
background --after-deps jest npx jest --coverage=false --ci --json --outputFile="$JEST_JSON"
# mypy needs the venv only: it runs while npm installs (mostly waiting on the network)
background --after-venv mypy "$ROOT/.venv/bin/python" -m mypy
start_zygote
export VRAMSCOPE_DEPS_READY=$DEPS_READY VRAMSCOPE_VENV_READY=$VENV_READY VRAMSCOPE_INSTALLED=$INSTALLED
run_check setup "" bash scripts/setup.sh --with-browser --lazy-bytecode
unset VRAMSCOPE_DEPS_READY VRAMSCOPE_VENV_READY VRAMSCOPE_INSTALLED
touch "$SETUP_DONE"
export PATH="$ROOT/.venv/bin:$ROOT/node_modules/.bin:$PATH"
export VIRTUAL_ENV=$ROOT/.venv
PY=$ROOT/.venv/bin/python
[ -x "$PY" ] || PY=python3

# ---- lint: each tool counts as one test. Run in the background beside the apart tests (below),
# niced: those mostly wait (on samplers, reporters, child processes), leaving ~35% of the two
# cores idle for ~45 s, about what the linters need (eslint, prettier, stylelint and ruff one
# after another: ~40 s of mostly one core); niced, they take little from the apart tests when
# both want a core. In the foreground before pytest they took 27-37 s of the run. mypy started
# in setup. Recorded at the end.
lint_tool() {
  local name=$1 rc
  shift
  echo "--- $name: $*"
  "$@" </dev/null
  rc=$?
  echo "$name $rc" >>"$RESULTS/lint-tools"
  return 0
}
lint_tools() {
  lint_tool eslint npm run -s eslint:check
  lint_tool prettier npm run -s prettier:check
  lint_tool stylelint npm run -s stylelint:check
  lint_tool ruff-check "$PY" -m ruff check .
  lint_tool ruff-format "$PY" -m ruff format --check .
}
start_lint() {
  : >"$RESULTS/lint-tools"
  background lint niced lint_tools
}
record_lint() {
  local lp=0 lf=0 failed_tools=() name rc
  banner lint
  collect lint
  local lint_rc=$BG_RC lint_seconds=$BG_SECONDS
  while read -r name rc; do
    if [ "$rc" = 0 ]; then
      lp=$((lp + 1))
    else
      lf=$((lf + 1))
      failed_tools+=("$name")
    fi
  done <"$RESULTS/lint-tools"
  if [ "$lint_rc" != 0 ] || [ $((lp + lf)) != 5 ]; then # ended before its last tool
    lf=$((lf + 1))
    failed_tools+=("(lint ended early: status $lint_rc)")
  fi
  echo "--- mypy: $PY -m mypy (started in setup, once the venv was ready)"
  collect mypy
  if [ "$BG_RC" = 0 ]; then
    lp=$((lp + 1))
  else
    lf=$((lf + 1))
    failed_tools+=(mypy)
  fi
  record lint $lp $lf "$lint_seconds" "${failed_tools[*]:+(failed: ${failed_tools[*]})}"
}

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
  "$PY" - "$dir" <<'EOF' || return 1
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
  check_wheel_install "$dir"/vramscope-*.whl
}

# check_wheel_install <wheel>: install the wheel into a throwaway environment that does not see
# .venv's prefix (so neither the development link in .venv/share/jupyter/labextensions nor the
# editable install), then `jupyter labextension list` there must list jupyterlab-vramscope as
# enabled and OK from that environment's labextensions folder, with no rebuild recommended.
check_wheel_install() {
  local whl=$1 tmp env_py site app_dir rc=0 out
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/vramscope-wheel.XXXXXX") || return 1
  env_py=$tmp/env/bin/python
  # A bare venv of the same base interpreter; a .pth line puts .venv's site-packages (jupyterlab
  # and its dependencies) on its path. That adds a plain path: .venv's own .pth files (the
  # editable vramscope) are not run, and sys.prefix, which decides the labextensions folders
  # jupyter reads, stays $tmp/env. JupyterLab's app dir stays .venv's, as for a user whose
  # jupyterlab and vramscope live in one environment. --ignore-installed is essential: without
  # it pip uninstalls .venv's (editable) vramscope before installing into --prefix.
  app_dir=$("$PY" -c 'import sys; print(sys.prefix)')/share/jupyter/lab
  "$("$PY" -c 'import sys; print(sys._base_executable)')" -m venv --without-pip "$tmp/env" \
    && site=$("$env_py" -c 'import sysconfig; print(sysconfig.get_path("purelib"))') \
    && "$PY" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' >"$site/_vramscope_deps.pth" \
    && "$PY" -m pip install --retries 0 -q --no-deps --no-compile --ignore-installed \
      --prefix "$tmp/env" "$whl" \
    || rc=1
  in_env() {
    env -u JUPYTER_PATH -u JUPYTER_PREFER_ENV_PATH -u PYTHONPATH JUPYTERLAB_DIR="$app_dir" \
      JUPYTER_DATA_DIR="$tmp/data" JUPYTER_CONFIG_DIR="$tmp/config" "$env_py" "$@" 2>&1
  }
  if [ "$rc" = 0 ]; then
    # `jupyter labextension list` is jupyterlab.labextensions:main; run through `jupyter` it
    # would start .venv's jupyter-labextension script instead of this interpreter
    # (scripts/jupyter_app.py: the same, ~3 s of CPU less).
    out=$(in_env -c 'import vramscope; print("vramscope imported from", vramscope.__file__)' \
      && in_env "$ROOT/scripts/jupyter_app.py" labextension list) || rc=1
    printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g; s/^/  | /'
    "$PY" - "$tmp/env" "$out" <<'EOF' || rc=1
import os, re, sys
prefix, out = sys.argv[1], re.sub(r"\x1b\[[0-9;]*m", "", sys.argv[2])
want_dir = os.path.join(prefix, "share", "jupyter", "labextensions")
errors = []
m = re.search(r"^vramscope imported from (.*)$", out, re.M)
if not m or not os.path.realpath(m.group(1)).startswith(os.path.realpath(prefix) + os.sep):
    errors.append("vramscope is not imported from the wheel's install")
location, found = "", []
for line in out.splitlines():
    if line.strip() and not line[0].isspace():
        location = os.path.realpath(line.strip())
    elif line.split()[:1] == ["jupyterlab-vramscope"]:
        found.append((location, line.strip()))
want = os.path.realpath(want_dir)
ok = [f for f in found if f[0] == want and re.search(r"\benabled\s+OK\b", f[1])]
if not ok:
    errors.append(f"jupyterlab-vramscope is not listed as enabled OK from {want_dir}")
if any(f[0] != want for f in found):
    errors.append("jupyterlab-vramscope is also listed from another location")
if re.search(r"lab build|Build recommended|needs to be (included|removed)", out):
    errors.append("jupyter recommends a rebuild")
print("wheel install:", "; ".join(errors) if errors else f"enabled OK from {want_dir}")
raise SystemExit(1 if errors else 0)
EOF
  fi
  rm -rf "$tmp"
  return "$rc"
}

# ---- jest -------------------------------------------------------------------------------------
banner jest
collect jest # started beside setup's front-end build
jest_rc=$BG_RC
read -r jp jf < <(node -e '
  try {
    const r = require(process.argv[1]);
    const broken = r.numRuntimeErrorTestSuites || 0;
    console.log(r.numPassedTests, r.numFailedTests + broken);
  } catch (e) { console.log("0 1"); }' "$JEST_JSON")
if [ "$jest_rc" != 0 ] && [ "$jf" = 0 ]; then jf=1; fi
jest_note=
if [ "$jp" = 0 ] && [ "$jf" = 0 ]; then
  jf=1
  jest_note="(no test passed)"
fi
record jest "$jp" "$jf" "$BG_SECONDS" "$jest_note"

# scripts/cuda-check.sh, the prepared CUDA check for a GPU machine: where torch sees no CUDA
# device (here) its dry run must start, set up the kernel's packages and kernelspec, find no
# CUDA device and say so in its summary (test-results/cuda-check.txt), and exit 0.
check_cuda_script() {
  local summary=$RESULTS/cuda-check.txt
  PYTHON=$PY bash scripts/cuda-check.sh --summary "$summary" || return 1
  if [ "$HAS_CUDA" = 0 ]; then # set below (cuda_device)
    grep -q '^NO CUDA DEVICE' "$summary" && grep -q '^0 passed, 0 failed$' "$summary"
  fi
}

# ---- wheel and cuda-check's dry run: in the background, niced, beside the browser tests' start
# (servers, browser and first pages: a core idle at times); recorded at the end. Beside pytest's
# main suite, which keeps both cores busy, they made it ~10 s longer; beside the apart tests
# and the demo, the demo took 21 s instead of 14-18. --------------------------------------
# No NVIDIA device node (nor WSL's /dev/dxg): no CUDA device, known without importing torch
# (~5 s in the foreground before pytest starts).
cuda_device() {
  compgen -G '/dev/nvidia[0-9]*' >/dev/null || [ -e /dev/dxg ] || return 1
  "$PY" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)'
}
HAS_CUDA=0
if cuda_device </dev/null; then HAS_CUDA=1; fi
start_side_suites() {
  background wheel niced check_wheel
  # with CUDA it is the whole check (up to 8 minutes, timed steps, exact reads): alone, later
  if ! skipped cuda-check && [ "$HAS_CUDA" = 0 ]; then
    background cuda-check niced check_cuda_script
  fi
}
record_side_suites() {
  run_collected wheel ""
  if skipped cuda-check; then
    record cuda-check 0 0 0 "(skipped by VRAMSCOPE_SKIP)"
  elif [ "$HAS_CUDA" = 0 ]; then
    run_collected cuda-check "(scripts/cuda-check.sh: its dry run where there is no CUDA)"
  else
    run_check cuda-check "(scripts/cuda-check.sh on the CUDA device)" check_cuda_script
  fi
}

# ---- pytest / cuda -------------------------------------------------------------------------
# run_pytest <suite> <junit xml> <pytest args...>: skipped tests are allowed (and counted in
# the note); no test collected (exit code 5) or no test passed is a failure.
run_pytest() {
  local suite=$1 xml=$2 t rc p f s note
  shift 2
  banner "$suite"
  t=$(date +%s)
  warm_env "$PY" -m pytest -q -rfE --junitxml="$xml" "$@" </dev/null
  rc=$?
  if [ "$rc" = 5 ]; then
    record "$suite" 0 1 $(($(date +%s) - t)) "(no tests collected)"
    return
  fi
  read -r p f s < <("$PY" - "$xml" <<'EOF'
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
  note="(${s} skipped)"
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
  if [ "$p" = 0 ] && [ "$f" = 0 ]; then
    f=1
    note="(no test passed, ${s} skipped)"
  fi
  record "$suite" "$p" "$f" $(($(date +%s) - t)) "$note"
}

# Three workers (pytest-xdist; whole files to a worker, so that a module's kernel starts once)
# run every test but those marked apart, which then run in suite pytest-apart, on two workers
# of their own (test/python/conftest.py says which and why). Three, on two cores: the tests
# wait on their kernels, and two workers left the cores ~12% idle (measured side by side,
# the main suite alone: 251 s with two workers, 60 core-seconds idle; 231 s with three, 24
# idle, on a machine slower by the gauge). -m replaces pyproject's
# `-m 'not cuda'`, hence its `not cuda` here. With PYTEST_ARGS (a selection of one's own) everything runs in one
# process, as before.
if [ -n "${PYTEST_ARGS:-}" ]; then
  start_side_suites
  use_zygote
  record_side_suites # first: nothing runs beside the apart tests
  start_lint
  # shellcheck disable=SC2086
  run_pytest pytest "$RESULTS/pytest.xml" test/python $PYTEST_ARGS
  record_lint
else
  use_zygote
  run_pytest pytest "$RESULTS/pytest.xml" -n 3 --dist loadfile --no-loadscope-reorder \
    -m "not cuda and not apart" test/python
  # Named files: collecting all of test/python again would import every module (~14 s).
  apart_files=$(cd test/python \
    && "$PY" -c 'import conftest; print(*sorted("test/python/" + f for f in conftest.APART_FILES))')
  start_lint
  # shellcheck disable=SC2086
  run_pytest pytest-apart "$RESULTS/pytest-apart.xml" -n 2 --dist loadfile --no-loadscope-reorder \
    -m "apart and not cuda" ${apart_files:-test/python}
  LATE_RECORDS=1 # lint, and the side suites (started before the browser tests): at the end
fi

# The tests marked cuda (deselected above) need a real CUDA device; without one the suite is
# recorded as not run, which is not a failure.
if skipped cuda; then
  record cuda 0 0 0 "(skipped by VRAMSCOPE_SKIP)"
else
  t=$(date +%s)
  if [ "$HAS_CUDA" = 1 ]; then
    run_pytest cuda "$RESULTS/pytest-cuda.xml" -m cuda test/python
  else
    record cuda 0 0 $(($(date +%s) - t)) "(no CUDA device)"
  fi
fi

# ---- the demo notebook executes headless, with nothing beside it but niced background jobs: its
# time is bounded (beside the apart tests it took 45 s of its 60 in a fresh-clone run, and they
# 70 s instead of ~50; beside lint and jest's end, not niced, 51 s) ------
check_demo() {
  "$PY" - examples/demo.ipynb "$DEMO_LIMIT_S" <<'EOF'
import sys
import time

sys.modules.setdefault("rfc3987_syntax", None)  # no IRI checked (scripts/jupyter_app.py)
import nbformat
from nbclient import NotebookClient

path, limit = sys.argv[1], float(sys.argv[2])
nb = nbformat.read(path, as_version=4)
nbformat.validate(nb)
start = time.time()
# Cells tagged raises-exception (the deliberate failure) may error; any other error fails.
NotebookClient(nb, timeout=int(limit), kernel_name="python3",
               resources={"metadata": {"path": "examples"}}).execute()
elapsed = time.time() - start
print(f"{path}: {len(nb.cells)} cells executed in {elapsed:.1f} s (limit {limit:.0f} s)")
if elapsed >= limit:
    print(f"{path}: too slow, the demo must run in under {limit:.0f} s")
    raise SystemExit(1)
EOF
}
if skipped demo; then
  record demo 0 0 0 "(skipped by VRAMSCOPE_SKIP)"
else
  run_check demo "(examples/demo.ipynb, limit ${DEMO_LIMIT_S} s)" check_demo
fi

# ---- UI tests (galata + Debian's chromium-headless-shell) ------------------------------------
if [ -n "${LATE_RECORDS:-}" ]; then
  start_side_suites # niced, beside the browser tests' start (servers, browser, first pages)
fi
if skipped ui; then
  record ui 0 0 0 "(skipped by VRAMSCOPE_SKIP)"
else
  banner ui
  t=$(date +%s)
  PW_JSON=$RESULTS/playwright.json
  # Two workers, each with its own JupyterLab server, one torch thread per kernel, and the
  # specs that time the page alone after the others (ui-tests/playwright.config.ts says why).
  # Measured on 2 cores: running the browser tests beside pytest made every suite slower
  # (pytest 5.7 -> 16 min, jest 22 -> 112 s) and scale.spec's 50 ms bound failed, so the
  # suites run one after another.
  warm_env PLAYWRIGHT_JSON_OUTPUT_NAME="$PW_JSON" \
    npx playwright test -c ui-tests/playwright.config.ts --reporter=list,json </dev/null
  ui_rc=$?
  # Skipped tests count as failures: a browser test that did not run proves nothing.
  # Tests never started (no result: scale.spec's project waits on the others, and does not
  # run after a failure there) are told apart from skipped ones, both counted as failed.
  read -r up uf us un < <(node -e '
    try {
      const r = require(process.argv[1]);
      const s = r.stats;
      const errors = (r.errors || []).length;
      let notRun = 0;
      const walk = suite => {
        for (const spec of suite.specs || []) {
          for (const t of spec.tests || []) notRun += (t.results || []).length ? 0 : 1;
        }
        (suite.suites || []).forEach(walk);
      };
      (r.suites || []).forEach(walk);
      console.log(s.expected + s.flaky, s.unexpected + errors + s.skipped, s.skipped - notRun, notRun);
    } catch (e) { console.log("0 1 0 0"); }' "$PW_JSON")
  if [ "$ui_rc" != 0 ] && [ "$uf" = 0 ]; then uf=1; fi
  ui_note=
  if [ "$us" != 0 ] || [ "$un" != 0 ]; then
    ui_note="(${us} skipped, ${un} not run after a failure: counted as failed)"
  fi
  if [ "$up" = 0 ] && [ "$uf" = 0 ]; then
    uf=1
    ui_note="(no test passed)"
  fi
  record ui "$up" "$uf" $(($(date +%s) - t)) "$ui_note"
fi

if [ -n "${LATE_RECORDS:-}" ]; then # lint (beside the apart tests), wheel and cuda-check
  record_side_suites
  record_lint
fi

# ---- total ------------------------------------------------------------------------------------
banner summary
printf '%s\n' "${SUMMARY[@]}"
echo "total time: $(($(date +%s) - T_ALL)) s"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
