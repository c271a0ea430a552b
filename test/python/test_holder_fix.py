"""A module holder's fix: `zero_grad` only when it has gradients to free; a module nothing
trains (the demo's `layer`, the template nn.TransformerEncoder deep-copies) gets `del`."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from vramscope.insight import InsightEngine  # noqa: E402


def test_module_fix_depends_on_its_gradients() -> None:
    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    model(torch.randn(2, 8, 64)).sum().backward()
    ns = {"layer": layer, "model": model}
    holders = {
        h["name"]: h for h in InsightEngine(namespace=ns, min_holder_bytes=1).snapshot()["holders"]
    }
    # the template's parameters are its own (deep-copied into the encoder), with no gradients
    template = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    assert not template & {p.untyped_storage().data_ptr() for p in model.parameters()}
    assert holders["layer"]["kind"] == "module"
    assert holders["layer"]["fix"].startswith("del layer")
    assert "zero_grad" not in holders["layer"]["fix"]
    assert "no gradients" in holders["layer"]["explanation"]
    assert holders["model"]["kind"] == "module"
    assert holders["model"]["fix"].startswith("model.zero_grad(set_to_none=True)")
    assert "del model" in holders["model"]["fix"]
    # the gradients are what zero_grad frees: bytes of parameters + grads, each storage once
    params = sum(p.untyped_storage().nbytes() for p in model.parameters())
    assert holders["model"]["bytes"] >= 2 * params
