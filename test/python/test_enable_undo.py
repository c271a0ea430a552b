"""Enable cells carry every setting over and undo cells put back the very objects and state
they replaced. The generated cells run with ``exec`` in a plain namespace (no vramscope, no
kernel) on small models; the ground truth is hashes of ``state_dict()`` (model, optimizer
with its state tensors, scheduler) and the ``requires_grad`` flags, taken here before the
enable cell ran."""

from __future__ import annotations

import hashlib
import warnings
from typing import Any

import pytest
import torch

from vramscope.optimize.techniques.checkpointing import block_cells
from vramscope.optimize.techniques.lora import lora_cells
from vramscope.optimize.techniques.optimizer import adafactor_cells


def digest(obj: Any) -> str:
    """A hash of nested dicts, lists and tensors (their dtype, shape and bytes)."""
    h = hashlib.sha256()

    def feed(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            t = value.detach().cpu().contiguous()
            h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(value, dict):
            h.update(b"{")
            for key in sorted(value, key=repr):
                h.update(repr(key).encode())
                feed(value[key])
            h.update(b"}")
        elif isinstance(value, (list, tuple)):
            h.update(b"[")
            for item in value:
                feed(item)
            h.update(b"]")
        else:
            h.update(repr(value).encode())

    feed(obj)
    return h.hexdigest()


def snapshot(model: Any, opt: Any, sched: Any) -> dict[str, Any]:
    return {
        "model": digest(model.state_dict()),
        "optimizer": digest(opt.state_dict()),
        "scheduler": digest(sched.state_dict()),
        "flags": [p.requires_grad for p in model.parameters()],
    }


def mlp_namespace() -> dict[str, Any]:
    """A model trained a few steps with AdamW over two param groups, one frozen layer and
    a scheduler, as a user's namespace holds them."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.Linear(16, 4)
    )
    net[2].weight.requires_grad_(False)  # frozen by the user
    opt = torch.optim.AdamW(
        [
            {"params": [net[0].weight, net[0].bias], "lr": 1e-3, "weight_decay": 0.1},
            {"params": [net[2].bias, *net[3].parameters()], "lr": 5e-4, "weight_decay": 0.0},
        ],
        betas=(0.9, 0.98),
        eps=1e-6,
        foreach=False,
    )
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    ns: dict[str, Any] = {"net": net, "opt": opt, "sched": sched, "torch": torch}
    for _ in range(3):
        train_step(ns)
    return ns


def train_step(ns: dict[str, Any]) -> None:
    x = torch.randn(4, 8)
    ns["opt"].zero_grad()
    ns["net"](x).pow(2).mean().backward()
    ns["opt"].step()
    ns["sched"].step()


def test_adafactor_carries_the_settings_and_groups_and_rebinds_the_scheduler() -> None:
    ns = mlp_namespace()
    old, sched = ns["opt"], ns["sched"]
    old_groups = [dict(g) for g in old.param_groups]
    code, _ = adafactor_cells("optimizer:adafactor", "opt", old, torch)
    exec(code, ns)
    new = ns["opt"]
    assert isinstance(new, torch.optim.Adafactor) and new is not old
    assert len(new.param_groups) == len(old_groups) == 2
    for g_new, g_old in zip(new.param_groups, old_groups):
        assert [id(p) for p in g_new["params"]] == [id(p) for p in g_old["params"]]
        assert g_new["lr"] == g_old["lr"]  # the scheduled learning rate, group by group
        assert g_new["weight_decay"] == g_old["weight_decay"]
        assert g_new["initial_lr"] == g_old["initial_lr"]  # what the scheduler decays from
        assert g_new["foreach"] is False and g_new["maximize"] is False
    assert new.param_groups[0]["weight_decay"] == 0.1  # was dropped to 0.0
    assert sched.optimizer is new
    assert sched.last_epoch == 3 and sched.base_lrs == [1e-3, 5e-4]
    exec(code, ns)  # re-running is harmless
    assert ns["opt"] is new
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "optimizer.step() overridden" from the scheduler
        for _ in range(2):
            train_step(ns)  # the scheduler decays the optimizer in use
    assert [g["lr"] for g in new.param_groups] == pytest.approx([1e-3 * 0.25, 5e-4 * 0.25])
    assert [g["lr"] for g in old.param_groups] == [g["lr"] for g in old_groups]


def test_adafactor_undo_restores_the_old_optimizer_and_its_state_exactly() -> None:
    ns = mlp_namespace()
    before = snapshot(ns["net"], ns["opt"], ns["sched"])
    old = ns["opt"]
    code, undo = adafactor_cells("optimizer:adafactor", "opt", old, torch)
    exec(code, ns)
    exec(undo, ns)
    assert ns["opt"] is old
    assert snapshot(ns["net"], ns["opt"], ns["sched"]) == before
    assert ns["sched"].optimizer is old
    exec(undo, ns)  # a second undo says there is nothing to undo
    assert ns["opt"] is old


def test_adafactor_undo_after_training_keeps_the_old_state_and_follows_the_schedule() -> None:
    ns = mlp_namespace()
    old = ns["opt"]
    state = digest(old.state_dict()["state"])
    code, undo = adafactor_cells("optimizer:adafactor", "opt", old, torch)
    exec(code, ns)
    for _ in range(2):
        train_step(ns)
    exec(undo, ns)
    assert ns["opt"] is old and ns["sched"].optimizer is old
    assert digest(old.state_dict()["state"]) == state  # the moments as they were
    # the learning rate the schedule reached while Adafactor was in use
    assert [g["lr"] for g in old.param_groups] == ns["sched"].get_last_lr()
    train_step(ns)  # and training goes on with it


def _gpt2(frozen_embeddings: bool) -> dict[str, Any]:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=1,
        n_embd=32,
        n_head=2,
        vocab_size=64,
        n_positions=16,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    lm = transformers.GPT2LMHeadModel(config)
    if frozen_embeddings:
        lm.transformer.wte.weight.requires_grad_(False)
        lm.transformer.wpe.weight.requires_grad_(False)
    adam = torch.optim.AdamW(
        [p for p in lm.parameters() if p.requires_grad],
        lr=3e-4,
        betas=(0.9, 0.98),
        eps=1e-6,
        weight_decay=0.05,
    )
    sched = torch.optim.lr_scheduler.LambdaLR(adam, lambda step: 1.0 / (1 + step))
    ns: dict[str, Any] = {"lm": lm, "adam": adam, "sched": sched, "torch": torch}
    for _ in range(2):
        lm_step(ns)
    return ns


def lm_step(ns: dict[str, Any]) -> None:
    tokens = torch.randint(0, 64, (2, 16))
    ns["adam"].zero_grad()
    ns["lm"](tokens, labels=tokens).loss.backward()
    ns["adam"].step()
    ns["sched"].step()


def test_lora_keeps_the_optimizer_settings_and_the_frozen_parameters() -> None:
    pytest.importorskip("peft")
    ns = _gpt2(frozen_embeddings=True)
    old = ns["adam"]
    code, _ = lora_cells("lora:peft", "lm", "adam", old, torch)
    exec(code, ns)
    new = ns["adam"]
    assert type(new) is torch.optim.AdamW and new is not old
    group = new.param_groups[0]
    assert group["betas"] == (0.9, 0.98)  # was reset to (0.9, 0.999)
    assert (group["eps"], group["weight_decay"]) == (1e-6, 0.05)
    assert group["lr"] == old.param_groups[0]["lr"]
    trainable = [p for p in ns["lm"].parameters() if p.requires_grad]
    assert [id(p) for p in group["params"]] == [id(p) for p in trainable]
    assert all("lora_" in n for n, p in ns["lm"].named_parameters() if p.requires_grad)
    assert ns["sched"].optimizer is new
    exec(code, ns)  # re-running is harmless
    assert ns["adam"] is new


def test_lora_undo_restores_the_model_optimizer_flags_and_scheduler_exactly() -> None:
    pytest.importorskip("peft")
    ns = _gpt2(frozen_embeddings=True)
    lm, old = ns["lm"], ns["adam"]
    before = snapshot(lm, old, ns["sched"])
    assert before["flags"][:2] == [False, False]  # the embeddings the user froze
    code, undo = lora_cells("lora:peft", "lm", "adam", old, torch)
    exec(code, ns)
    exec(undo, ns)
    assert ns["lm"] is lm and ns["adam"] is old and ns["sched"].optimizer is old
    assert snapshot(ns["lm"], ns["adam"], ns["sched"]) == before  # embeddings still frozen
    assert not hasattr(ns["lm"], "peft_config")
    lm_step(ns)  # the plain model trains again with its old optimizer


def test_lora_undo_after_training_merges_the_adapters_and_restores_the_flags() -> None:
    pytest.importorskip("peft")
    ns = _gpt2(frozen_embeddings=True)
    lm, old = ns["lm"], ns["adam"]
    flags, state = [p.requires_grad for p in lm.parameters()], digest(old.state_dict()["state"])
    weights = digest(lm.state_dict())
    code, undo = lora_cells("lora:peft", "lm", "adam", old, torch)
    exec(code, ns)
    for _ in range(2):
        lm_step(ns)
    exec(undo, ns)
    assert ns["lm"] is lm and ns["adam"] is old
    assert [p.requires_grad for p in lm.parameters()] == flags
    assert digest(old.state_dict()["state"]) == state
    assert digest(lm.state_dict()) != weights  # the trained adapters are merged in


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ff = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.ff(h)


def test_checkpointing_undo_puts_back_the_users_own_instance_forward() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(), Block(), Block())
    calls: list[int] = []

    def own_forward(h: torch.Tensor, block: Block = model[1]) -> torch.Tensor:
        calls.append(1)
        return Block.forward(block, h) * 2

    model[1].forward = own_forward  # the user's own instance-level wrapper
    ns: dict[str, Any] = {"model": model, "torch": torch}
    x = torch.randn(2, 8, requires_grad=True)
    expected = model(x)
    code, undo = block_cells("checkpoint:model", ["model"], 3, "Block")
    exec(code, ns)
    exec(code, ns)  # re-running is harmless
    assert all(hasattr(vars(b)["forward"], "plain_forward") for b in model)
    assert torch.equal(model(x), expected)
    exec(undo, ns)
    assert vars(model[1])["forward"] is own_forward  # not deleted
    assert "forward" not in vars(model[0]) and "forward" not in vars(model[2])
    calls.clear()
    assert torch.equal(model(x), expected) and calls == [1]
