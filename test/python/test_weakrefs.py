"""No user tensor, module, optimizer or frame is kept alive by vramscope once the user
deletes it: a real kernel goes through every feature that looks at user objects (per-cell
records, model insight and holders, a watched model, advice, the estimator, every export
format, the processes table, the session report, a failed cell's frame), then the user
deletes everything and weakrefs taken in the kernel must all be dead."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from faults_session import Session

pytestmark = pytest.mark.kernel

BUILD = """\
import gc, sys, weakref
import torch
import vramscope
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.Adam(model.parameters())
x = torch.randn(1024, 256)
losses = []
for _ in range(3):
    loss = model(x).sum()
    loss.backward()
    opt.step()
    losses.append(loss)  # keeps every step's graph
_refs = {name: weakref.ref(obj) for name, obj in [
    ("model", model), ("opt", opt), ("x", x), ("loss", loss),
    ("weight", model[0].weight), ("grad", model[0].weight.grad),
    ("state", opt.state[model[0].weight]["exp_avg"]),
]}
"""

FAIL_IN_FRAME = """\
def _fails():
    in_frame = torch.ones(256 * 1024)
    _refs["frame_local"] = weakref.ref(in_frame)
    raise ValueError("fails with a tensor in its frame")
_fails()
"""

USE_FEATURES = """\
vramscope.watch(model)
_report = vramscope.session_report()
_advice = vramscope.advise(model)
_estimate = vramscope.estimate(model, batch_size=1024)
del _report, _advice, _estimate
"""

DELETE = """\
del model, opt, x, loss, losses, _fails
sys.last_traceback = sys.last_value = sys.last_type = sys.last_exc = None
get_ipython().InteractiveTB.tb = None
gc.collect()
"""

ALIVE = "sorted(name for name, ref in _refs.items() if ref() is not None)"


@pytest.fixture
def s() -> Iterator[Session]:
    session = Session()
    try:
        yield session
    finally:
        session.close()


def test_nothing_of_the_user_is_kept_alive(s: Session) -> None:
    s.cell(BUILD, "build")
    insight = s.next_of("insight", timeout=60)["insight"]
    assert {"model", "opt", "x"} <= {h["name"] for h in insight["holders"]}, insight["holders"]
    s.cell(FAIL_IN_FRAME, "frame", ok=False)
    s.cell(USE_FEATURES, "features")
    # the panel's requests over the same objects
    assert s.result("get_insight", {"model": "model"})["insight"]["model"] == "model"
    s.result("get_advice", {"model": "model"})
    s.result("estimate", {"model": "model"})
    for fmt in ("json", "csv", "markdown", "html"):
        assert s.result("export_report", {"format": fmt})["content"]
    s.result("get_processes")
    s.result("get_report")
    # everything is alive while the user holds it
    assert s.k.eval(ALIVE) == sorted(
        ["model", "opt", "x", "loss", "weight", "grad", "state", "frame_local"]
    )

    s.cell(DELETE, "delete")
    s.cell("gc.collect()\n_after = 1", "after-delete")  # insight runs again after the del
    s.result("get_insight")
    s.result("get_advice")
    s.k.run_ok("gc.collect()")
    assert s.k.eval(ALIVE) == []
