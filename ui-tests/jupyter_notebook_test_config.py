"""Jupyter server configuration for the Notebook 7 UI test (never use it in production).

Started by ui-tests/servers.mjs (for playwright.config.ts) as `jupyter notebook --config <this
file> --port N` next to the JupyterLab servers: a temporary root dir, no token, no XSRF check,
and the app exposed as ``window.jupyterapp``. Galata's helper extension is JupyterLab-only: not
loaded.
"""

import getpass
from tempfile import mkdtemp

c = get_config()  # type: ignore[name-defined]  # noqa: F821

c.ServerApp.ip = "127.0.0.1"
c.ServerApp.port_retries = 0
c.ServerApp.open_browser = False
c.ServerApp.root_dir = mkdtemp(prefix="vramscope-nb7-")
c.IdentityProvider.token = ""
c.ServerApp.password = ""
c.ServerApp.disable_check_xsrf = True
c.JupyterNotebookApp.expose_app_in_browser = True
if getpass.getuser() == "root":
    c.ServerApp.allow_root = True
c.ServerApp.log_level = "WARN"
