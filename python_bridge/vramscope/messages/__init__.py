"""Message schemas beside the protocol, one module per feature (the mirror of ``src/messages/``).

``protocol.py`` holds the core messages and imports the features' shapes from here; feature
packages (``optimize``, ...) import their shapes from here too, so the protocol never depends on
a feature package. TypedDicts only: no torch, nothing that runs.
"""
