#!/usr/bin/env bash
# The CUDA check: one prepared run, for a machine with an NVIDIA GPU that has PyTorch (and
# pytest) but no Jupyter, no package index and no network.
#
#   bash scripts/cuda-check.sh                 # on the GPU machine, from the checkout's root
#   bash scripts/cuda-check.sh --force-cpu     # the same harness on CPU (no CUDA needed)
#   bash scripts/cuda-check.sh --summary FILE  # where the summary goes (see below)
#
# What it needs beside the checkout: the folder `.whl/` (carry it: it is ignored by git), the
# wheels that a kernel needs and such a machine lacks: ipykernel, jupyter_client, jupyter_core,
# comm, traitlets, pyzmq, tornado, ipython and its dependencies, platformdirs, nest_asyncio2.
# Pure-Python wheels fit any Python 3; compiled ones (pyzmq, tornado, wcwidth) are picked for
# the interpreter that runs here, from .whl/ and its subfolders (.whl/other-pythons/ holds
# pyzmq for 3.11; .whl/pyzmq-*-cp312-abi3-* serves 3.12 and later). .whl/if-missing/ holds
# what the GPU machine's image already has (python-dateutil, six, pygments, packaging,
# typing_extensions, psutil), each installed only where it does not import. They go in with
# `pip install --no-index --no-deps --target` into a temporary folder put on PYTHONPATH, as is
# python_bridge/ (the bridge is not installed: no hatchling needed). They are installed only
# where IPython, ipykernel, jupyter_client or zmq does not import (CUDA_CHECK_WHEELS=always:
# whenever .whl/ is there), so a machine with Jupyter installed needs no .whl/.
# A device call: command `bash scripts/cuda-check.sh`, carry [".whl"], timeout_s 540.
#
# Making .whl/ (on a machine with the package index; one version of each project):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl $(sed -n 's/^# *wheel: //p' scripts/cuda-check.sh)
#   and a pyzmq wheel for the GPU machine's Python (3.12 there: cp312-abi3). Where the index
#   has none, build it: libzmq static (cmake -DBUILD_SHARED=OFF -DBUILD_STATIC=ON
#   -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DWITH_LIBSODIUM=OFF, installed to a prefix), then in
#   pyzmq's source, with Cython on PYTHONPATH and python3.12: `pip wheel --no-build-isolation
#   --no-deps . -Ccmake.define.ZMQ_PREFIX=<prefix> -Ccmake.define.PYZMQ_LIBZMQ_RPATH=OFF
#   "-Ccmake.define.CMAKE_MODULE_LINKER_FLAGS=-Wl,--no-as-needed -lstdc++" -Cwheel.py-api=cp312`.
# wheel: ipykernel==7.4.0 jupyter_client==8.10.0 jupyter_core==5.9.1 comm==0.2.3
# wheel: traitlets==5.16.1 tornado==6.5.10 ipython==9.17.1 ipython_pygments_lexers==1.1.1
# wheel: jedi==0.20.0 parso==0.8.7 matplotlib-inline==0.2.2 pexpect==4.9.0 ptyprocess==0.7.0
# wheel: prompt_toolkit==3.0.53 wcwidth==0.9.1 stack-data==0.6.3 asttokens==3.0.2
# wheel: executing==2.2.1 pure_eval==0.2.4 nest-asyncio2==1.7.3 platformdirs==4.12.2
# and into .whl/if-missing (-d .whl/if-missing): python-dateutil six pygments packaging
#   typing_extensions psutil
# Not carried: debugpy (optional for ipykernel), nbformat/nbclient (their jsonschema needs
# rpds-py, compiled): test files that pytest cannot collect for a missing package (test_cli*,
# test_advise*, which import nbformat) are left out of the cuda suite and named in the
# summary; none of them has a test marked cuda.
#
# What it runs, within CUDA_CHECK_LIMIT_S seconds in all (default 480; every step is under
# `timeout`, and the summary is written whatever happens):
#   setup         the wheels installed, ipykernel/jupyter_client/zmq/IPython/vramscope
#                 imported, a python3 kernelspec (this interpreter, this PYTHONPATH) that
#                 jupyter_client resolves in private JUPYTER_* folders
#   kernel-smoke  one kernel started through jupyter_client, the bridge bootstrapped in it as
#                 the front end does, a 4 MiB tensor made (on CUDA: its cell reads +4 MiB on
#                 cuda:0 exactly)
#   cuda          `pytest -m cuda test/python` (with --force-cpu: not run, kernel-smoke stands
#                 in for it)
#   transparency  test/python/test_transparency.py with VRAMSCOPE_TRANSPARENCY_DEVICE=cuda
#                 (cpu with --force-cpu), every marker selected (its CUDA-only probes too)
# Where torch sees no CUDA device (and no --force-cpu), this is the dry run: it does the setup
# (the wheels only if .whl/ is there), says that no CUDA device was found, writes the summary
# saying so and exits 0. scripts/test.sh runs that as its suite cuda-check.
#
# Summary: --summary FILE, else $OUT/cuda-check.txt where $OUT is set (the device tool's
# folder that comes back), else test-results/cuda-check.txt. It holds the GPU's name, the
# driver, torch and its CUDA version, each suite's passed/failed/skipped counts and seconds,
# and the failing tests' names; its last line is `N passed, N failed`.
#
# Exit status: 0 every suite passed, or the dry run found no CUDA device as it should;
# 1 a suite failed or ran out of time; 2 the setup failed (nothing was tested).
set -uo pipefail

T0=$(date +%s)
LIMIT_S=${CUDA_CHECK_LIMIT_S:-480}
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
ROOT=$(pwd)
PY=${PYTHON:-python3}
MODE=cuda
SUMMARY_FILE=
while [ $# -gt 0 ]; do
  case $1 in
    --force-cpu) MODE=cpu ;;
    --summary)
      SUMMARY_FILE=$2
      shift
      ;;
    -h | --help)
      sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "cuda-check: unknown argument $1 (see --help)" >&2
      exit 2
      ;;
  esac
  shift
done
if [ -z "$SUMMARY_FILE" ]; then
  if [ -n "${OUT:-}" ]; then SUMMARY_FILE=$OUT/cuda-check.txt; else SUMMARY_FILE=$ROOT/test-results/cuda-check.txt; fi
fi
mkdir -p "$(dirname "$SUMMARY_FILE")" || exit 2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cuda-check.XXXXXX") || exit 2
LOGS=$(dirname "$SUMMARY_FILE")/cuda-check-logs
rm -rf "$LOGS" && mkdir -p "$LOGS"

LINES=()   # the summary, line by line
SUITES=()  # one line per suite
FAILING=() # failing test names
PASSED=0
FAILED=0
note() {
  LINES+=("$*")
  echo "[cuda-check] $*"
}
left() { echo $((LIMIT_S - ($(date +%s) - T0))); }

write_summary() {
  {
    echo "vramscope cuda-check, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), mode: $MODE"
    printf '%s\n' "${LINES[@]}"
    echo
    echo "suites:"
    printf '  %s\n' "${SUITES[@]:-(none run)}"
    if [ ${#FAILING[@]} -gt 0 ]; then
      echo "failing tests:"
      printf '  %s\n' "${FAILING[@]}"
    fi
    echo "logs: $LOGS"
    echo "total time: $(($(date +%s) - T0)) s (limit ${LIMIT_S} s)"
    echo "$PASSED passed, $FAILED failed"
  } >"$SUMMARY_FILE"
  echo
  echo "==================== cuda-check summary ($SUMMARY_FILE) ===================="
  cat "$SUMMARY_FILE"
}
finish() { # finish <exit status>
  write_summary
  rm -rf "$WORK"
  exit "$1"
}

# ---- the machine -----------------------------------------------------------------------------
note "checkout: $ROOT ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
if ! command -v "$PY" >/dev/null; then
  note "setup FAILED: no $PY"
  finish 2
fi
facts=$(timeout 120 "$PY" - <<'EOF' 2>&1
import platform, sys
print(f"python: {platform.python_version()} ({sys.executable})")
try:
    import torch
except Exception as e:
    print(f"torch: not importable ({type(e).__name__}: {e})")
    print("cuda_available: 0")
    raise SystemExit
print(f"torch: {torch.__version__}")
print(f"torch CUDA version: {torch.version.cuda}")
ok = torch.cuda.is_available()
print(f"cuda_available: {int(ok)}")
if ok:
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        print(f"gpu {i}: {p.name}, {p.total_memory / 2**30:.1f} GiB, "
              f"compute capability {p.major}.{p.minor}, {p.multi_processor_count} SMs")
EOF
)
CUDA_OK=$(sed -n 's/^cuda_available: //p' <<<"$facts")
while IFS= read -r line; do
  [[ $line == cuda_available:* ]] || note "$line"
done <<<"$facts"
if command -v nvidia-smi >/dev/null; then
  note "nvidia-smi: $(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader 2>&1 | head -4 | paste -sd ';')"
else
  note "nvidia-smi: not found"
fi
if [[ $facts != *"torch: "[0-9]* ]]; then
  note "setup FAILED: torch is not importable by $PY"
  finish 2
fi
if [ "$MODE" = cuda ] && [ "$CUDA_OK" != 1 ]; then
  MODE=dry-run
fi

# ---- setup: wheels, imports, kernelspec ------------------------------------------------------
SITE=$WORK/site
export PYTHONPATH=$ROOT/python_bridge${PYTHONPATH:+:$PYTHONPATH}
kernel_packages() { "$PY" -c 'import IPython, ipykernel, jupyter_client, zmq' >/dev/null 2>&1; }
if [ "${CUDA_CHECK_WHEELS:-}" != always ] && kernel_packages; then
  note "wheels: not needed, this Python has ipykernel, jupyter_client, pyzmq and IPython"
elif compgen -G "$ROOT/.whl/*.whl" >/dev/null || compgen -G "$ROOT/.whl/*/*.whl" >/dev/null; then
  # one wheel per project: the best one for this interpreter (packaging's tag order)
  mapfile -t wheels < <("$PY" - "$ROOT/.whl" <<'EOF'
import glob, os, sys
try:
    from packaging.tags import sys_tags
    from packaging.utils import parse_wheel_filename
except ImportError:
    from pip._vendor.packaging.tags import sys_tags
    from pip._vendor.packaging.utils import parse_wheel_filename
rank = {tag: i for i, tag in enumerate(sys_tags())}
import importlib.util, zipfile

def present(path):
    """Whether every top-level module the wheel holds already imports here."""
    tops = {n.split("/")[0] for n in zipfile.ZipFile(path).namelist()}
    tops = {t[:-3] if t.endswith(".py") else t for t in tops
            if not t.endswith((".dist-info", ".data")) and not t.endswith(".pth")}
    return all(importlib.util.find_spec(t.split(".")[0]) is not None for t in tops)

best, seen = {}, set()
for path in glob.glob(os.path.join(sys.argv[1], "**", "*.whl"), recursive=True):
    name, _, _, tags = parse_wheel_filename(os.path.basename(path))
    if os.path.basename(os.path.dirname(path)) == "if-missing" and present(path):
        continue
    seen.add(name)
    fit = min((rank[t] for t in tags if t in rank), default=None)
    if fit is not None and (name not in best or fit < best[name][0]):
        best[name] = (fit, path)
for name in sorted(seen - set(best)):
    print(f"[cuda-check] wheels: none in .whl fits this Python for {name}", file=sys.stderr)
print(*sorted(p for _, p in best.values()), sep="\n")
EOF
  )
  note "wheels: ${#wheels[@]} picked from .whl for this Python: $(printf '%s\n' "${wheels[@]}" | xargs -n1 basename | sed 's/-py[23].*//; s/-cp[0-9].*//' | paste -sd ' ')"
  if ! timeout 180 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --disable-pip-version-check --upgrade --target "$SITE" "${wheels[@]}" >"$LOGS/pip.log" 2>&1; then
    note "setup FAILED: pip install --target of the wheels (log: $LOGS/pip.log)"
    sed 's/^/  | /' "$LOGS/pip.log" | tail -15
    finish 2
  fi
  export PYTHONPATH=$SITE:$PYTHONPATH
else
  note "wheels: no .whl folder here, and this Python lacks a kernel's packages (carry .whl)"
fi

# Jupyter's folders, private to this run; the python3 kernelspec is this interpreter.
export JUPYTER_PATH=$WORK/jupyter JUPYTER_DATA_DIR=$WORK/data JUPYTER_CONFIG_DIR=$WORK/config
export JUPYTER_RUNTIME_DIR=$WORK/runtime IPYTHONDIR=$WORK/ipython JUPYTER_PLATFORM_DIRS=1
export PYTHONDONTWRITEBYTECODE=1 PIP_NO_INDEX=1
# Cold kernels only (test/python/conftest.py would fork them warm from a zygote with torch
# imported): the first run on real hardware proves the kernels users start.
export VRAMSCOPE_COLD_KERNELS=1
mkdir -p "$WORK/jupyter/kernels/python3"
"$PY" - "$WORK/jupyter/kernels/python3/kernel.json" <<'EOF'
import json, sys
spec = {
    "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
    "display_name": "Python 3 (cuda-check)",
    "language": "python",
    "metadata": {"debugger": False},
}
json.dump(spec, open(sys.argv[1], "w"), indent=1)
EOF
if ! imports=$(timeout 120 "$PY" - <<'EOF' 2>&1
import sys
import IPython, ipykernel, jupyter_client, zmq, vramscope
from jupyter_client.kernelspec import KernelSpecManager
spec = KernelSpecManager().get_kernel_spec("python3")
assert spec.argv[0] == sys.executable, f"python3 kernelspec runs {spec.argv[0]}"
print(f"ipykernel {ipykernel.__version__}, jupyter_client {jupyter_client.__version__}, "
      f"pyzmq {zmq.__version__} (libzmq {zmq.zmq_version()}), IPython {IPython.__version__}, "
      f"vramscope {vramscope.__version__} from {vramscope.__file__}")
print(f"kernelspec python3: {' '.join(spec.argv)}")
EOF
); then
  note "setup FAILED: the kernel's packages do not import"
  sed 's/^/  | /' <<<"$imports" | tail -15
  finish 2
fi
while IFS= read -r line; do note "$line"; done <<<"$imports"

if [ "$MODE" = dry-run ]; then
  note "NO CUDA DEVICE: torch sees none, so no CUDA test was run (dry run: setup checked only)"
  SUITES+=("(dry run: no CUDA device; cuda and transparency suites not run)")
  finish 0
fi

# ---- suites ------------------------------------------------------------------------------------
# record <suite> <passed> <failed> <skipped> <seconds> [note]
record() {
  PASSED=$((PASSED + $2))
  FAILED=$((FAILED + $3))
  SUITES+=("$(printf '%-13s %4d passed %4d failed %4d skipped %5ss %s' "$1" "$2" "$3" "$4" "$5" "${6:-}")")
  echo "[cuda-check] suite $1: $2 passed, $3 failed, $4 skipped in $5 s ${6:-}"
}

DEVICE=$([ "$MODE" = cuda ] && echo cuda || echo cpu)
cat >"$WORK/smoke.py" <<'EOF'
# One bridge kernel, loaded as the front end loads it; on CUDA, a 4 MiB tensor's cell must
# read +4 MiB exactly on cuda:0.
import sys, time
sys.path.insert(0, "test/python")
from kernel_harness import BOOTSTRAP, KernelHarness

device = sys.argv[1]
t = time.monotonic()
k = KernelHarness()
try:
    reply = k.execute(BOOTSTRAP, silent=True)
    assert reply["content"]["status"] == "ok", reply["content"]
    stream = k.comm_open("stream")
    hello = k.comm_data(stream, "hello")
    warm = f"import torch\n_w = torch.ones(1, device={device!r}); del _w"
    for cell_id, code in (("smoke-warm", warm),
                          ("smoke", f"x = torch.empty(4 << 20, dtype=torch.uint8, device={device!r})")):
        reply = k.execute(code, cell_id=cell_id)
        assert reply["content"]["status"] == "ok", reply["content"]
        record = k.comm_data(stream, "cell")["record"]
        assert record["cell_id"] == cell_id and record["ok"], record
    figures = record["devices"]
    if device == "cuda":
        assert "cuda:0" in figures, f"no cuda:0 in the cell's record: {figures}"
        assert figures["cuda:0"]["delta_bytes"] == 4 << 20, figures["cuda:0"]
    shown = ", ".join(f"{d} {f['delta_bytes'] / 2**20:+.2f} MiB" for d, f in figures.items())
    print(f"bridge {hello['bridge_version']} (protocol {hello['protocol_version']}): "
          f"a 4 MiB tensor on {device} read {shown} in {time.monotonic() - t:.1f} s")
finally:
    k.close()
EOF
t=$(date +%s)
budget=$(left)
if timeout -k 5 $((budget < 120 ? budget : 120)) "$PY" "$WORK/smoke.py" "$DEVICE" \
  >"$LOGS/kernel-smoke.log" 2>&1; then
  record kernel-smoke 1 0 0 $(($(date +%s) - t)) "($(tail -1 "$LOGS/kernel-smoke.log"))"
else
  record kernel-smoke 0 1 0 $(($(date +%s) - t)) "(log: $LOGS/kernel-smoke.log)"
  FAILING+=("kernel-smoke: $(grep -v '^\s*$' "$LOGS/kernel-smoke.log" | tail -1)")
  tail -20 "$LOGS/kernel-smoke.log" | sed 's/^/  | /'
fi

# Test files that cannot be collected here for a package missing on this machine (pytest's
# own collection says which: a ModuleNotFoundError for a module that is neither vramscope's
# nor test/python's); any other collection error is left to fail the suite.
unimportable=
if [ "$MODE" = cuda ]; then
  t=$(date +%s)
  timeout -k 5 120 "$PY" -m pytest -p no:cacheprovider --co -q -m cuda test/python \
    </dev/null >"$LOGS/collect.log" 2>&1
  unimportable=$("$PY" - "$LOGS/collect.log" <<'EOF'
import os, re, sys
text = open(sys.argv[1], errors="replace").read()
local = {f[:-3] for f in os.listdir("test/python") if f.endswith(".py")} | {"vramscope"}
blocks = re.split(r"^_+ ERROR collecting (\S+) _+$", text, flags=re.M)
for path, body in zip(blocks[1::2], blocks[2::2]):
    missing = re.findall(r"ModuleNotFoundError: No module named '([^']+)'", body)
    if missing and missing[-1].split(".")[0] not in local:
        print(f"{os.path.basename(path)}\t{missing[-1]}")
EOF
  )
  note "collection checked in $(($(date +%s) - t)) s (log: $LOGS/collect.log)"
fi
ignores=()
while IFS=$'\t' read -r file mods; do
  [ -n "$file" ] || continue
  ignores+=("--ignore=test/python/$file")
  note "not collected here: $file (no module $mods)"
done <<<"$unimportable"

# run_suite <suite> <seconds at most> <pytest args...>
run_suite() {
  local suite=$1 budget=$2 t rc xml=$LOGS/$1.xml counts
  shift 2
  t=$(date +%s)
  if [ "$budget" -lt 20 ]; then
    record "$suite" 0 1 0 0 "(not run: no time left of ${LIMIT_S} s)"
    FAILING+=("$suite: not run, no time left")
    return
  fi
  echo "[cuda-check] suite $suite: pytest $(printf '%q ' "$@")(at most ${budget} s)"
  timeout -k 10 "$budget" "$PY" -m pytest -v -rfE -p no:cacheprovider --junitxml="$xml" "$@" \
    </dev/null >"$LOGS/$suite.log" 2>&1
  rc=$?
  tail -25 "$LOGS/$suite.log" | sed 's/^/  | /'
  # counts from the junit XML; after a time-out (no XML) from pytest -v's per-test lines
  counts=$("$PY" - "$xml" "$LOGS/$suite.log" <<'EOF'
import re, sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
    cases = root.iter("testcase")
    p = f = s = 0
    names = []
    for c in cases:
        kids = {k.tag for k in c}
        name = f"{c.get('classname', '')}::{c.get('name', '')}"
        if kids & {"failure", "error"}:
            f += 1
            names.append(name)
        elif "skipped" in kids:
            s += 1
        else:
            p += 1
except Exception:
    log = open(sys.argv[2], errors="replace").read()
    p = len(re.findall(r" PASSED", log))
    s = len(re.findall(r" SKIPPED", log))
    names = re.findall(r"^(\S+::\S+) (?:FAILED|ERROR)", log, re.M)
    f = len(names)
print(p, f, s)
print(*names, sep="\n")
EOF
  )
  read -r p f s <<<"$(head -1 <<<"$counts")"
  while IFS= read -r name; do [ -n "$name" ] && FAILING+=("$suite: $name"); done < <(tail -n +2 <<<"$counts")
  local why=""
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    why="(TIMED OUT after ${budget} s; counts up to then)"
    f=$((f + 1))
    FAILING+=("$suite: timed out after ${budget} s")
  elif [ "$rc" = 5 ]; then
    why="(no tests collected)"
    f=$((f + 1))
  elif [ "$rc" != 0 ] && [ "$f" = 0 ]; then
    why="(pytest exit $rc)"
    f=1
  elif [ "$p" = 0 ] && [ "$f" = 0 ]; then
    why="(no test passed)"
    f=1
  fi
  if [ -n "$why" ] && [ "$rc" != 124 ] && [ "$rc" != 137 ]; then FAILING+=("$suite: $why"); fi
  record "$suite" "$p" "$f" "$s" $(($(date +%s) - t)) "$why"
}

if [ "$MODE" = cuda ]; then
  # at most half of what is left, and 180 s: the transparency suite has the rest; one test
  # stuck is stopped at 120 s where pytest-timeout is there (it is on the GPU image)
  budget=$(($(left) - 20))
  budget=$((budget / 2 > 180 ? 180 : budget / 2))
  per_test=()
  if "$PY" -c 'import pytest_timeout' 2>/dev/null; then per_test=(--timeout=120); fi
  run_suite cuda "$budget" -m cuda "${per_test[@]}" "${ignores[@]}" test/python
else
  note "cuda suite: not run (--force-cpu; kernel-smoke stands in for it)"
fi
if [ -f test/python/test_transparency.py ]; then
  VRAMSCOPE_TRANSPARENCY_DEVICE=$DEVICE run_suite transparency $(($(left) - 15)) \
    -m "" test/python/test_transparency.py
else
  record transparency 0 1 0 0 "(test/python/test_transparency.py is missing)"
fi

if [ "$FAILED" = 0 ]; then finish 0; else finish 1; fi
