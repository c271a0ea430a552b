"""Write examples/demo.ipynb (no outputs): `python examples/make_demo.py`.

The notebook is the vramscope tour that `bash scripts/demo.sh` opens; `bash scripts/test.sh`
executes it headless with nbclient and fails it when it takes a minute or more, so keep it
small: it runs on CPU in about 10 s on a 2-core machine (the training cell about 4 s).
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

CELLS = [
    (
        "md",
        """# vramscope tour

Run the cells one by one (Shift+Enter) and watch the **vramscope** panel in the right sidebar
and the small footer under each cell: every cell shows how much memory it added (delta) and
how high it went while it ran (peak), per device. On this CPU-only machine the device is
`cpu` (glibc in-use heap bytes); on a GPU machine the same cells show `cuda:0` when you move
tensors there.""",
    ),
    (
        "code",
        """import time

import torch

import vramscope

torch.manual_seed(0)
print("vramscope", vramscope.__version__, "| torch", torch.__version__)""",
    ),
    ("md", "## A model\nA 2-layer Transformer encoder, about 25 MiB of float32 parameters."),
    (
        "code",
        """layer = torch.nn.TransformerEncoderLayer(
    d_model=512, nhead=8, dim_feedforward=2048, batch_first=True
)
model = torch.nn.TransformerEncoder(layer, num_layers=2)
n_params = sum(p.numel() for p in model.parameters())
print(f"{n_params / 1e6:.1f} M parameters = {n_params * 4 / 2**20:.1f} MiB")
vramscope.watch(model)  # model insight reports on this module""",
    ),
    ("md", "## A 64 MiB tensor\nThe footer of this cell reads **+64.0 MiB**."),
    ("code", "x = torch.ones(16 * 1024 * 1024)  # 16 Mi float32 = 64 MiB"),
    ("md", "Freeing it gives the memory back: **-64.0 MiB**."),
    ("code", "del x"),
    (
        "md",
        """## Peak vs delta
This cell ends where it started (delta about 0) but peaks at about +128 MiB while it runs:
the peak is what decides whether a cell fits on a device.""",
    ),
    (
        "code",
        """tmp = torch.empty(32 * 1024 * 1024)  # 128 MiB, only for the duration of the cell
tmp.fill_(1.0)
total = tmp.sum().item()
del tmp
total""",
    ),
    (
        "md",
        """## A short training loop
About 15 Adam steps: the live timeline in the panel moves while this runs, and the optimizer
state (two moments per parameter, about 2x the model) shows up in the delta.""",
    ),
    (
        "code",
        """optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
batch = torch.randn(8, 32, 512)  # 8 sequences of 32 tokens: quick on a CPU
start = time.time()
for _ in range(15):
    optimizer.zero_grad()
    loss = model(batch).pow(2).mean()
    loss.backward()
    optimizer.step()
print(f"15 steps in {time.time() - start:.1f} s, loss {loss.item():.4f}")""",
    ),
    (
        "md",
        """## The classic leak: keeping the loss tensor
`losses.append(loss)` keeps every step's autograd graph (and its saved activations) alive:
memory grows with every step.""",
    ),
    (
        "code",
        """losses = []
for _ in range(8):
    loss = model(batch).pow(2).mean()
    losses.append(loss)  # leak: holds the graph of every step
print(len(losses), "graphs kept alive")""",
    ),
    ("md", "The fix: keep the number, not the tensor (`.item()`); the graphs are freed."),
    (
        "code",
        """del losses
losses = []
for _ in range(8):
    loss = model(batch).pow(2).mean()
    losses.append(loss.item())  # a float: the graph is freed at once
print(f"mean loss {sum(losses) / len(losses):.4f}")""",
    ),
    (
        "md",
        "## A cell that fails\nFailed cells are recorded too (marked as errors in the panel).",
    ),
    (
        "code",
        """a = torch.ones(1024, 1024)
a @ torch.ones(512, 512)  # RuntimeError: shapes cannot be multiplied""",
        ["raises-exception"],
    ),
    (
        "md",
        """## The session report
`vramscope.session_report()` returns the whole session as a JSON-serialisable dict
(see docs/report-schema.md); here, the cells with the largest peaks.""",
    ),
    (
        "code",
        """report = vramscope.session_report()
print(report["schema"], "|", len(report["cells"]), "cells |", len(report["samples"]), "samples")
for cell in report["cells"]:
    for device, d in cell.get("devices", {}).items():
        print(
            f"[{cell.get('execution_count')}] {device}: delta {d['delta_bytes'] / 2**20:+8.1f} MiB"
            f"  peak {d['peak_delta_bytes'] / 2**20:+8.1f} MiB"
        )""",
    ),
]


def build() -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    for index, (kind, source, *tags) in enumerate(CELLS):
        cell = new_markdown_cell(source) if kind == "md" else new_code_cell(source)
        cell.id = f"{kind}-{index:02d}"  # stable ids: regenerating gives the same file
        if tags:
            cell.metadata["tags"] = tags[0]
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


if __name__ == "__main__":
    out = Path(__file__).with_name("demo.ipynb")
    nbformat.write(build(), out)
    print(f"wrote {out}")
