"""Jupyter server configuration for the vramscope UI tests (never use it in production).

Started by ui-tests/servers.mjs (for playwright.config.ts) as `jupyter lab --config <this file>
--port N`: galata's helper gives a temporary root dir, no token, no XSRF check and exposes the
app as ``window.jupyterapp``; the tests run as root on CI, hence ``allow_root``.
"""

import getpass

from jupyterlab.galata import configure_jupyter_server

c = get_config()  # type: ignore[name-defined]  # noqa: F821

configure_jupyter_server(c)

c.ServerApp.ip = "127.0.0.1"
c.ServerApp.open_browser = False
if getpass.getuser() == "root":
    c.ServerApp.allow_root = True
# No network here: do not ask for news or updates.
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
c.ServerApp.log_level = "WARN"
# No "build recommended" check at each page load: the front end's GET /lab/api/build makes the
# server run `jupyterlab.commands.build_check` (~0.6 s of CPU on these machines, ~40 page loads
# a run). The tests install no extension from the page, and the wheel suite checks that
# `jupyter labextension list` recommends no rebuild.
c.ServerApp.tornado_settings = {"page_config_data": {"buildCheck": False, "buildAvailable": False}}
