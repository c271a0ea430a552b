#!/usr/bin/env bash
# Set up everything (idempotent), then start JupyterLab with vramscope on the demo notebook.
#
#   bash scripts/demo.sh            # prints http://127.0.0.1:8888/lab/tree/examples/demo.ipynb?token=...
#
# The demo runs from its own environment, .venv-demo, with vramscope installed from the built
# wheel (the way users install it); the tests use .venv with the editable install. PORT sets
# the port (default 8888). Extra arguments go to `jupyter lab` (e.g. --ip=0.0.0.0).
# Stop the server with Ctrl+C twice in the terminal (or Ctrl+C, then y).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
VENV=$ROOT/.venv-demo
PORT=${PORT:-8888}

VRAMSCOPE_VENV=$VENV bash scripts/setup.sh --wheel

# Our own token, so that the URL printed below is the one that works. The server's root is
# the repository, so that the file browser shows examples/demo.ipynb where the URL opens it.
TOKEN=$("$VENV/bin/python" -c 'import secrets; print(secrets.token_hex(24))')
NOTEBOOK=examples/demo.ipynb
URL="http://127.0.0.1:${PORT}/lab/tree/${NOTEBOOK}?token=${TOKEN}"

ARGS=(
  --port "$PORT"
  --ServerApp.port_retries=0
  --ServerApp.root_dir="$ROOT"
  --IdentityProvider.token="$TOKEN"
  --LabApp.default_url="/lab/tree/${NOTEBOOK}"
)
if [ "$(id -u)" = 0 ]; then
  ARGS+=(--allow-root)
fi

cat <<MSG

[demo] JupyterLab with vramscope is starting on port ${PORT}. Open the demo notebook:

    ${URL}

[demo] Run its cells (Run > Run All Cells); the vramscope panel is in the right sidebar.
[demo] To stop the server: press Ctrl+C twice in this terminal (or Ctrl+C, then y),
[demo] or from another terminal: kill $$

MSG
exec "$VENV/bin/jupyter" lab "${ARGS[@]}" "$@"
