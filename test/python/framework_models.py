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


#: the data: 256 sequences of 32 tokens of width 64, 10 classes, in batches of 32
DATA = """
ds = torch.utils.data.TensorDataset(torch.randn(256, 32, 64), torch.randint(0, 10, (256, 32)))
loader = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True)
"""
#: a Lightning Trainer cell (run before each fit: past max_steps a Trainer trains no more)
LIGHTNING_TRAINER = """trainer = L.Trainer(max_steps=2, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False)
"""
#: the test's own count of the bytes ``fn()``'s forward leaves for backward: the distinct
#: storages saved-tensor hooks of its own see, other than ``model``'s tensors
SAVED_TRUTH = """
def _gt_saved_by(model, fn):
    own = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    seen = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in own:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    del out
    return sum(seen.values())
"""
