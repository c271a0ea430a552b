"""Run a Jupyter command in this process, without jsonschema's IRI grammars:
``python scripts/jupyter_app.py lab ARGS...`` runs what ``jupyter lab ARGS...`` runs (likewise
``notebook`` and ``labextension``).

Importing jupyter_server (or nbformat) imports jsonschema, whose format module then imports
``rfc3987_syntax`` when it is installed (JupyterLab's ``jsonschema[format-nongpl]`` brings it)
for the optional ``iri`` format check, and that module compiles ~40 lark grammars as it is
imported: ~3 s of CPU each time, as much as the rest of `jupyter labextension list`. So the
module is marked absent, for this process only, as `vramscope profile` does
(vramscope/cli/__init__.py, ``_without_iri_grammars``): the setup's and the wheel suite's
`labextension list` and the browser tests' servers check no IRI. The kernels a server starts
are other processes, untouched.
"""

import sys

APPS = {
    "lab": "jupyterlab.labapp",
    "notebook": "notebook.app",
    "labextension": "jupyterlab.labextensions",
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in APPS:
        sys.exit(f"usage: python {sys.argv[0]} {{{','.join(APPS)}}} [ARGS...]")
    app = sys.argv.pop(1)
    sys.argv[0] = f"jupyter-{app}"
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    sys.exit(__import__(APPS[app], fromlist=["main"]).main())
