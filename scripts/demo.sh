#!/usr/bin/env bash
# Set up everything (idempotent), then open JupyterLab with vramscope and the demo notebook.
#
#   bash scripts/demo.sh            # http://localhost:8888/lab (PORT=9999 to change)
#
# Extra arguments go to `jupyter lab` (e.g. --no-browser, --ip=0.0.0.0).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh --wheel

ARGS=(--port "${PORT:-8888}")
if [ "$(id -u)" = 0 ]; then
  ARGS+=(--allow-root)
fi

echo "[demo] starting JupyterLab on port ${PORT:-8888}; open examples/demo.ipynb and run the cells"
exec .venv/bin/jupyter lab "${ARGS[@]}" "$@" examples/demo.ipynb
