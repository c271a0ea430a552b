#!/usr/bin/env bash
# Idempotent setup of a vramscope development/demo environment from the repository root.
#
#   bash scripts/setup.sh                 # venv + npm deps + front-end build + install (develop)
#   bash scripts/setup.sh --with-browser  # ... and Debian's chromium-headless-shell for the UI tests
#   bash scripts/setup.sh --wheel         # install the built wheel (the user path) instead
#   bash scripts/setup.sh --lazy-bytecode # pip compiles no .pyc (~50 s of CPU for ~13,500
#                                         # files); Python writes them as modules are first
#                                         # imported (scripts/test.sh, which allows that)
#
# Every step is skipped when its inputs have not changed since it last ran (stamp files under
# .venv/.vramscope-stamps hold a hash of the inputs); the front end is rebuilt whenever src/,
# style/, schema/ or the package/TypeScript config changed. Needs Debian/Ubuntu, Python 3.11+
# and Node.js 20+ with npm (when node/npm are missing and this runs as root, Debian's nodejs
# and npm are installed with apt-get). Environment:
#   PYTHON        interpreter used to create .venv (default python3)
#   TORCH_SPEC    torch requirement (default torch==2.13.0+cpu from the local find-links, or
#                 torch==2.13.0 from the PyTorch CPU index when that folder is missing)
#   VRAMSCOPE_WHEELS    the local find-links folder (default /opt/wheels)
#   VRAMSCOPE_FORCE=1   ignore all stamps and redo every step
#   VRAMSCOPE_VENV      the virtual environment to set up (default .venv; scripts/demo.sh
#                       uses .venv-demo for the wheel install, so that the demo and the tests
#                       never switch one environment between two install modes)
#   VRAMSCOPE_VENV_READY  a file to create once the venv is ready, maybe before node_modules
#                       (scripts/test.sh starts mypy then)
#   VRAMSCOPE_DEPS_READY  a file to create once the venv and node_modules are ready, before the
#                       front end is built (scripts/test.sh starts jest then)
#   VRAMSCOPE_INSTALLED   a file to create once vramscope is installed into the venv, before the
#                       last checks (scripts/test.sh starts the warm-kernel zygote then)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)

WITH_BROWSER=0
MODE=develop
PIP_COMPILE=()
for arg in "$@"; do
  case "$arg" in
    --with-browser) WITH_BROWSER=1 ;;
    --lazy-bytecode) PIP_COMPILE=(--no-compile) ;;
    --wheel) MODE=wheel ;;
    --develop) MODE=develop ;;
    -h | --help)
      sed -n '2,25p' "$0"
      exit 0
      ;;
    *)
      echo "setup.sh: unknown option $arg" >&2
      exit 2
      ;;
  esac
done

export PIP_RETRIES=0 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

log() { printf '[setup] %s\n' "$*"; }
now() { date +%s; }
die() {
  printf '[setup] ERROR: %s\n' "$*" >&2
  exit 1
}

# ensure_node: node and npm must be on PATH. When they are missing, install Debian's nodejs and
# npm (only as root, with apt-get); otherwise stop with what to install.
ensure_node() {
  local major
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      log "node/npm not found: installing Debian's nodejs and npm (apt-get)"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq </dev/null || true
      apt-get install -y -qq --no-install-recommends nodejs npm </dev/null >/dev/null || true
    fi
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
      die "node and npm were not found. Install Node.js 20 or newer with npm (on Debian/Ubuntu" \
        "as root: apt-get install nodejs npm), or run setup.sh as root so that it can."
    fi
  fi
  major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if [ "$major" -lt 20 ] 2>/dev/null; then
    log "WARNING: node $(node --version) is older than the supported Node.js 20; the build may fail"
  fi
}

# pip_sources: where the CPU torch wheel comes from. The local find-links folder when there is
# one (TORCH_SPEC defaults to the exact torch==2.13.0+cpu there); otherwise the PyTorch CPU
# index as an extra index, with torch==2.13.0: a spec without the local version matches
# 2.13.0+cpu there, which pip prefers over PyPI's 2.13.0 (a local version sorts higher).
TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
pip_sources() {
  local wheels=${VRAMSCOPE_WHEELS:-/opt/wheels}
  PIP_SOURCE_ARGS=()
  if [ -d "$wheels" ]; then
    export PIP_FIND_LINKS="${PIP_FIND_LINKS:-$wheels}"
    TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0+cpu}
    TORCH_FROM=$wheels
  else
    TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
    PIP_SOURCE_ARGS=(--extra-index-url "$TORCH_CPU_INDEX")
    TORCH_FROM="$TORCH_CPU_INDEX (no $wheels)"
  fi
}

PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null || die "$PYTHON not found: Python 3.11 or newer is needed (set PYTHON)"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "$PYTHON is Python $("$PYTHON" -c 'import platform; print(platform.python_version())'); 3.11 or newer is needed (set PYTHON)"
ensure_node
pip_sources
VENV=${VRAMSCOPE_VENV:-$ROOT/.venv}
case "$VENV" in /*) ;; *) VENV=$ROOT/$VENV ;; esac
STAMPS=$VENV/.vramscope-stamps
LABEXT=$ROOT/python_bridge/vramscope/labextension
NPM_NAME=jupyterlab-vramscope
REQUIREMENTS=(
  "jupyterlab==4.6.4"
  "notebook>=7.4,<8" # Jupyter Notebook 7 (7.6.x pairs with jupyterlab 4.6): UI tests
  ipykernel
  ipywidgets
  "$TORCH_SPEC"
  psutil
  numpy
  nbclient
  nbformat
  jupyter_client
  comm
  pytest
  pytest-xdist # scripts/test.sh runs the Python tests on two workers
  ruff
  mypy
  hatchling
  editables
  jupyter_builder
  transformers # Optimize tests: a small-config GPT-2, random weights
  peft         # Optimize tests: the LoRA cell (optional: its test is skipped without it)
  lightning    # Optimize tests: Lightning's Trainer cells (optional: its test is skipped without it)
)

# hash_of <label> <paths...>: one hash over the label and the contents of every file below paths.
hash_of() {
  local label=$1
  shift
  {
    echo "$label"
    local p
    for p in "$@"; do
      [ -e "$p" ] || continue
      find "$p" -type f -not -name '*.pyc' -not -path '*/__pycache__/*' -print0 \
        | LC_ALL=C sort -z | xargs -0 -r sha256sum
    done
  } | sha256sum | cut -c1-64
}

stamp_ok() { [ "${VRAMSCOPE_FORCE:-0}" != 1 ] && [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }
stamp_set() {
  mkdir -p "$STAMPS"
  echo "$2" >"$STAMPS/$1"
}

T0=$(now)

# npm_step: the npm dependencies, unless node_modules matches package.json and the lock.
npm_step() {
  local t
  if [ -d node_modules ] && [ -f node_modules/.vramscope-npm-stamp ] \
    && [ "$(cat node_modules/.vramscope-npm-stamp)" = "$NPM_KEY" ] && [ "${VRAMSCOPE_FORCE:-0}" != 1 ]; then
    log "node_modules up to date"
    return 0
  fi
  t=$(now)
  log "npm install"
  npm install --no-audit --no-fund --loglevel=error </dev/null
  echo "$NPM_KEY" >node_modules/.vramscope-npm-stamp
  log "npm install done in $(($(now) - t)) s"
}
NPM_KEY=$(hash_of "$(node --version)" package.json package-lock.json)
NPM_LOG=$(mktemp)
npm_step >"$NPM_LOG" 2>&1 &
NPM_PID=$!

# chromium_step: Debian's chromium-headless-shell for the browser tests, when neither it nor
# Debian's chromium is there: Debian's chromium built as the headless-only shell, the binary
# Playwright itself runs headless tests in (the full browser's headless mode keeps its browser
# and GPU processes busier: measured over the whole browser suite, ~33 CPU-s more; the tests use
# chromium where the shell is missing). Started here in the background (a fresh machine has
# none: ~40 s of download and unpacking) so that it overlaps the two installs below instead of
# following the build; waited for in step 5.
CHROMIUM=/usr/bin/chromium-headless-shell
has_browser() { [ -x "$CHROMIUM" ] || [ -x /usr/bin/chromium ]; }
chromium_step() {
  local t SUDO=
  t=$(now)
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  log "installing Debian's chromium-headless-shell (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq </dev/null
  $SUDO apt-get install -y -qq --no-install-recommends chromium-headless-shell </dev/null >/dev/null
  log "chromium-headless-shell installed in $(($(now) - t)) s"
}
CHROMIUM_PID=
CHROMIUM_LOG=
if [ "$WITH_BROWSER" = 1 ] && ! has_browser; then
  CHROMIUM_LOG=$(mktemp)
  chromium_step >"$CHROMIUM_LOG" 2>&1 &
  CHROMIUM_PID=$!
fi
# wait_chromium: the background chromium install has ended (apt-get holds dpkg's lock while
# it runs); its output printed. Status 1 when it failed.
wait_chromium() {
  local rc=0
  [ -n "$CHROMIUM_PID" ] || return 0
  wait "$CHROMIUM_PID" || rc=$?
  CHROMIUM_PID=
  cat "$CHROMIUM_LOG"
  rm -f "$CHROMIUM_LOG"
  return "$rc"
}
# setup stopped early: npm and apt-get stop too
trap 'kill "$NPM_PID" ${CHROMIUM_PID:+"$CHROMIUM_PID"} 2>/dev/null || true' EXIT

# 1. Python virtual environment ------------------------------------------------------------
PY_KEY=$(hash_of "$("$PYTHON" -c 'import sys; print(sys.version)') ${REQUIREMENTS[*]}")
if [ -x "$VENV/bin/python" ] && stamp_ok venv "$PY_KEY"; then
  log "venv up to date"
else
  t=$(now)
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating $(basename "$VENV") with $PYTHON"
    # pip into the new venv from $PYTHON's own pip (pip --python), not ensurepip, which
    # byte-compiles it (~8 s of CPU against ~2); ensurepip where that cannot be done.
    if "$PYTHON" -m venv --without-pip "$VENV" \
      && "$PYTHON" -m pip --python "$VENV/bin/python" install --retries 0 -q \
        "${PIP_COMPILE[@]}" "${PIP_SOURCE_ARGS[@]}" pip >/dev/null 2>&1 \
      && "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
      :
    elif rm -rf "$VENV" && ! "$PYTHON" -m venv "$VENV"; then
      # Debian's own python3 ships venv/ensurepip separately.
      rm -rf "$VENV"
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        wait_chromium || true # dpkg's lock; step 5 checks for the browser again
        log "installing python3-venv (apt-get)"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv </dev/null >/dev/null
      fi
      "$PYTHON" -m venv "$VENV"
    fi
  fi
  log "installing Python packages into $(basename "$VENV") ($TORCH_SPEC from $TORCH_FROM)"
  "$VENV/bin/python" -m pip install --retries 0 -q "${PIP_COMPILE[@]}" "${PIP_SOURCE_ARGS[@]}" \
    "${REQUIREMENTS[@]}"
  stamp_set venv "$PY_KEY"
  log "venv ready in $(($(now) - t)) s"
fi
export PATH="$VENV/bin:$PATH"
export VIRTUAL_ENV=$VENV
if [ -n "${VRAMSCOPE_VENV_READY:-}" ]; then
  touch "$VRAMSCOPE_VENV_READY"
fi

# 2. npm dependencies: started in the background before the venv (step 1) and waited for here,
# so that the two downloads overlap (~70 s each from a fresh clone) -------------------------
if [ -n "${NPM_PID:-}" ]; then
  if ! wait "$NPM_PID"; then
    cat "$NPM_LOG" >&2
    die "npm install failed (its output is above)"
  fi
  cat "$NPM_LOG"
  rm -f "$NPM_LOG"
fi
if [ -n "${VRAMSCOPE_DEPS_READY:-}" ]; then
  touch "$VRAMSCOPE_DEPS_READY"
fi

# 3. Front-end build (TypeScript + federated labextension) ----------------------------------
BUILD_KEY=$(hash_of build src style schema package.json package-lock.json tsconfig.json install.json)
if [ -f "$LABEXT/package.json" ] && [ -d "$LABEXT/static" ] && stamp_ok build "$BUILD_KEY"; then
  log "front end up to date"
else
  t=$(now)
  log "building the front end (npm run build:prod)"
  npm run -s build:prod </dev/null
  stamp_set build "$BUILD_KEY"
  log "front end built in $(($(now) - t)) s"
fi

# 4. Install the Python package and its labextension -----------------------------------------
SHARE_EXT=$VENV/share/jupyter/labextensions/$NPM_NAME
if [ "$MODE" = develop ]; then
  INSTALL_KEY=$(hash_of develop pyproject.toml scripts/hatch_build.py scripts/package_version.py)
  if stamp_ok install "$INSTALL_KEY" && python -c 'import vramscope' 2>/dev/null; then
    log "editable install up to date"
  else
    t=$(now)
    log "pip install -e . (editable)"
    # pip would write the shared-data through an existing link into the build folder.
    if [ -L "$SHARE_EXT" ]; then rm -f "$SHARE_EXT"; fi
    python -m pip install --retries 0 -q --no-deps --no-build-isolation -e .
    stamp_set install "$INSTALL_KEY"
    log "installed in $(($(now) - t)) s"
  fi
  # An editable install copies the labextension; link it instead so the server always serves
  # the freshly built front end (what `jupyter labextension develop` does).
  if [ "$(readlink "$SHARE_EXT" 2>/dev/null)" != "$LABEXT" ]; then
    rm -rf "$SHARE_EXT"
    mkdir -p "$(dirname "$SHARE_EXT")"
    ln -s "$LABEXT" "$SHARE_EXT"
    log "linked $SHARE_EXT -> $LABEXT"
  fi
else
  INSTALL_KEY=$(hash_of wheel pyproject.toml scripts python_bridge/vramscope install.json)
  if stamp_ok install "$INSTALL_KEY" && [ -f "$SHARE_EXT/package.json" ] && [ ! -L "$SHARE_EXT" ]; then
    log "wheel install up to date"
  else
    t=$(now)
    log "building the wheel into dist/"
    rm -rf dist
    python -m pip wheel --retries 0 -q --no-deps --no-build-isolation -w dist .
    if [ -L "$SHARE_EXT" ]; then rm -f "$SHARE_EXT"; fi
    log "pip install dist/$(basename dist/vramscope-*.whl)"
    python -m pip install --retries 0 -q --no-deps --force-reinstall dist/vramscope-*.whl
    stamp_set install "$INSTALL_KEY"
    log "installed in $(($(now) - t)) s"
  fi
fi

if [ -n "${VRAMSCOPE_INSTALLED:-}" ]; then
  touch "$VRAMSCOPE_INSTALLED"
fi

# `jupyter labextension list` (scripts/jupyter_app.py: the same, ~3 s of CPU less)
labextension_list() { "$VENV/bin/python" "$ROOT/scripts/jupyter_app.py" labextension list; }
if ! labextension_list 2>&1 | grep -E "$NPM_NAME .*enabled.*OK" >/dev/null; then
  labextension_list >&2 || true
  echo "[setup] ERROR: $NPM_NAME is not listed as enabled OK by 'jupyter labextension list'" >&2
  exit 1
fi
log "jupyter labextension list: $NPM_NAME enabled OK"

# 5. Browser for the UI tests ------------------------------------------------------------------
if [ "$WITH_BROWSER" = 1 ]; then
  wait_chromium || true # started in the background at the top; checked here
  if ! has_browser; then
    chromium_step # not there (a python3-venv install came first, or the first try failed)
  fi
  has_browser \
    || die "Debian's chromium-headless-shell could not be installed (apt-get install chromium-headless-shell)"
  [ -x "$CHROMIUM" ] || CHROMIUM=/usr/bin/chromium
  log "browser for the UI tests: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
fi

log "done in $(($(now) - T0)) s"
