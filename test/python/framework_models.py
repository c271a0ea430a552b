"""Model code shared by the framework tests' cells (Lightning, accelerate): a residual MLP
block (``Block``) that the checkpointing card finds repeated in ``Net``."""

BLOCK = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x)))

"""


def net_class(base: str, methods: str = "") -> str:
    """``class Net(<base>)``: three ``Block`` s and a head (``net.blocks``, ``net.head``),
    with ``methods`` (source indented as methods) after its forward."""
    return f"""
class Net({base}):
    def __init__(self, d=64, n=3):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(d) for _ in range(n)])
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        return self.head(self.blocks(x))
{methods}
"""
