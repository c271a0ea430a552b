"""Message schemas beside the protocol, one module per subject (the mirror of ``src/messages/``).

- ``records``: what the kernel records: a device, a cell's record and per-device delta, a
  timeline sample, the settings, the kernel;
- ``insight``: model insight's payload and the models found;
- ``processes``: the ``processes`` message (child processes and ranks);
- ``optimize``: the Optimize messages (advice, the batch-size search).

``protocol.py`` holds the messages each side sends and the request validation, built from
these; the devices, the recorder and the feature packages import their shapes from here too, so
the protocol never depends on a feature package. TypedDicts and small pure helpers only: no
torch, nothing that runs.
"""
