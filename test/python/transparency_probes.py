"""The transparency suite's probes: notebook cells run in a plain kernel and in a kernel with
the bridge loaded (and again with advice armed), whose printed output must be identical.

Each probe is a :class:`Probe`: ``cells`` run one after another; each prints what it computed
(hashes of parameters and gradients after a few optimizer steps, exceptions as ``type:
message``, ``torch.compile`` graph and node counts through a counting backend). ``model``
names the namespace variable the advisor is armed on in the "advice armed" kernel, after
``arm_after`` cells (the step watch then measures the next training step op by op).

Probes use their own variable names (``p<N>_...``) so that they run one after another in one
kernel; each starts from ``torch.manual_seed``. ``DEVICE`` is the probes' device (``cpu``, or
``cuda`` under ``VRAMSCOPE_TRANSPARENCY_DEVICE=cuda``: scripts/cuda-check.sh). The probes that
run ``torch.compile`` come last: once Dynamo has compiled anything, the step watch follows no
step op by op (vramscope/compiled.py), so the probes before them have it on.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Probe:
    name: str
    cells: tuple[str, ...]
    model: str | None = None  # the namespace name of the model advice is armed on
    arm_after: int = 1  # cells run before advice is armed
    needs: tuple[str, ...] = ()  # importable modules the probe needs (else it is skipped)
    cuda_only: bool = False
    #: the armed kernel's step watch follows a step of ``model`` (False where none is to be
    #: followed: a transform inside the step abandons it, a copy of the model is trained)
    steps: bool = True


PRELUDE = r'''
import hashlib as _tp_hashlib
import os as _tp_os
import tempfile as _tp_tempfile
import warnings as _tp_warnings
import torch
import torch.nn as nn
import torch.nn.functional as F

DEVICE = _tp_os.environ.get("VRAMSCOPE_TRANSPARENCY_DEVICE", "cpu")
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True, warn_only=True)
_tp_warnings.filterwarnings("ignore")


def tp_hash(*objs):
    """sha256 (16 hex digits) of tensors, and of modules' parameters and gradients."""
    h = _tp_hashlib.sha256()
    for obj in objs:
        if isinstance(obj, torch.nn.Module):
            tensors = []
            for name, p in obj.named_parameters():
                h.update(name.encode())
                tensors.append(p)
                tensors.append(p.grad if p.grad is not None else torch.zeros(0))
        elif isinstance(obj, torch.Tensor):
            tensors = [obj]
        else:
            tensors = list(obj)
        for t in tensors:
            t = t.detach().to("cpu").contiguous()
            h.update(str((tuple(t.shape), t.dtype)).encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def tp_try(fn):
    """Run fn; print its result or its exception, type and message."""
    try:
        out = fn()
    except Exception as exc:  # noqa: BLE001
        print(f"raised {type(exc).__name__}: {exc}")
        return None
    print("ok", out if not isinstance(out, torch.Tensor) else tp_hash(out))
    return out


def tp_warns(fn):
    """Run fn; print the warnings it gave (the prelude ignores warnings otherwise)."""
    with _tp_warnings.catch_warnings(record=True) as rec:
        _tp_warnings.simplefilter("always")
        out = fn()
    print("warnings:", [(w.category.__name__, str(w.message)[:60]) for w in rec])
    return out


def tp_modes():
    """The dispatch modes on the stack, by class name."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return [type(m).__name__ for m in _get_current_dispatch_mode_stack()]


class TpCount:
    """A torch.compile backend that counts the graphs and their nodes."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(len(gm.graph.nodes))
        return gm.forward

    def __repr__(self):
        return f"{len(self.graphs)} graphs, nodes {self.graphs}"


def tp_mlp(seed=0, width=16):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(8, width), nn.Tanh(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 4)
    ).to(DEVICE)


def tp_data(seed=1, n=6):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, generator=g).to(DEVICE), torch.randn(n, 4, generator=g).to(DEVICE)


def tp_train(model, opt, steps=3, x=None, y=None, loss_fn=None):
    if x is None:
        x, y = tp_data()
    for _ in range(steps):
        opt.zero_grad()
        out = model(x)
        loss = loss_fn(out, y) if loss_fn else F.mse_loss(out, y)
        loss.backward()
        opt.step()
    return tp_hash(model)
'''

_SIGMOID_INPLACE = """
class P{n}(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        h = torch.sigmoid(self.fc(x))
        {mutate}
        return self.out(h)

torch.manual_seed(0)
p{n}_net = P{n}().to(DEVICE)
p{n}_x = torch.randn(4, 8, device=DEVICE)
"""

PROBES: tuple[Probe, ...] = (
    Probe(
        "inplace_on_saved_output",
        (
            _SIGMOID_INPLACE.format(n=1, mutate="h += 1"),
            "tp_try(lambda: p1_net(p1_x).sum().backward())\nprint(tp_hash(p1_net))",
            # a second time: the bridge measures the first forward of a cell (and the first
            # forward of a cell after a change) op by op
            "tp_try(lambda: p1_net(p1_x).sum().backward())\nprint(tp_hash(p1_net))",
        ),
        model="p1_net",
    ),
    Probe(
        "inplace_on_saved_input",
        (
            _SIGMOID_INPLACE.format(n=2, mutate="h2 = self.fc(h); h += h2; h = h * 1.0"),
            "tp_try(lambda: p2_net(p2_x).sum().backward())\nprint(tp_hash(p2_net))",
            "p2_x2 = torch.randn(5, 8, device=DEVICE)\n"
            "tp_try(lambda: p2_net(p2_x2).sum().backward())",
        ),
        model="p2_net",
    ),
    Probe(
        "inplace_error_with_anomaly_mode",
        (
            _SIGMOID_INPLACE.format(n=3, mutate="h.mul_(2)"),
            "with torch.autograd.set_detect_anomaly(True):\n"
            "    tp_try(lambda: p3_net(p3_x).sum().backward())",
        ),
    ),
    Probe(
        "inplace_not_saved_is_fine",
        (
            _SIGMOID_INPLACE.format(n=4, mutate="h = h * 2; h += 1"),
            "p4_opt = torch.optim.SGD(p4_net.parameters(), lr=0.1)\n"
            "for _ in range(3):\n"
            "    p4_opt.zero_grad(); p4_net(p4_x).pow(2).sum().backward(); p4_opt.step()\n"
            "print(tp_hash(p4_net))",
        ),
        model="p4_net",
    ),
    Probe(
        "closure_optimizer_lbfgs",
        (
            "pl_net = tp_mlp(); pl_x, pl_y = tp_data()\n"
            "pl_opt = torch.optim.LBFGS(pl_net.parameters(), lr=0.5, max_iter=4)\n"
            "def pl_closure():\n"
            "    pl_opt.zero_grad()\n"
            "    loss = F.mse_loss(pl_net(pl_x), pl_y)\n"
            "    loss.backward()\n"
            "    return loss\n"
            "print(round(float(pl_opt.step(pl_closure)), 6), tp_hash(pl_net))",
            # armed: the step watch wraps the closure (the forward runs inside step())
            "for _ in range(2):\n"
            "    print(round(float(pl_opt.step(pl_closure)), 6))\n"
            "print(tp_hash(pl_net), pl_opt.state[pl_opt._params[0]]['func_evals'])",
        ),
        model="pl_net",
    ),
    Probe(
        "accelerate_accumulate_bf16",
        (
            "from accelerate import Accelerator\n"
            "pa_net = tp_mlp(); pa_x, pa_y = tp_data()\n"
            "pa_opt = torch.optim.AdamW(pa_net.parameters(), lr=1e-2)\n"
            "pa_acc = Accelerator(cpu=DEVICE == 'cpu', mixed_precision='bf16',"
            " gradient_accumulation_steps=2)\n"
            "pa_net, pa_opt = pa_acc.prepare(pa_net, pa_opt)\n"
            "print(type(pa_opt).__name__, pa_net(pa_x).dtype)",
            # armed: the step (2 micro-batches, the forward wrapped in autocast by prepare,
            # AcceleratedOptimizer stepping the inner AdamW) is followed op by op
            "for _ in range(4):\n"
            "    with pa_acc.accumulate(pa_net):\n"
            "        loss = F.mse_loss(pa_net(pa_x), pa_y)\n"
            "        pa_acc.backward(loss)\n"
            "        pa_opt.step(); pa_opt.zero_grad()\n"
            "print(round(float(loss), 6), tp_hash(pa_net), pa_opt.optimizer.state[\n"
            "    pa_opt.optimizer.param_groups[0]['params'][0]]['step'].item())",
        ),
        model="pa_net",
        needs=("accelerate",),
    ),
    Probe(
        "adam_training_steps",
        (
            "p5_net = tp_mlp(); p5_opt = torch.optim.Adam(p5_net.parameters(), lr=1e-2)\n"
            "print(tp_train(p5_net, p5_opt))",
            "print(tp_train(p5_net, p5_opt))",
            "print(tp_train(p5_net, p5_opt, x=torch.randn(3, 8, device=DEVICE), "
            "y=torch.zeros(3, 4, device=DEVICE)))",
        ),
        model="p5_net",
    ),
    Probe(
        "double_backward_gradient_penalty",
        (
            "p6_net = tp_mlp(); p6_x, _ = tp_data()\np6_x.requires_grad_(True)",
            "out = p6_net(p6_x).sum()\n"
            "(g,) = torch.autograd.grad(out, p6_x, create_graph=True)\n"
            "penalty = g.pow(2).sum()\npenalty.backward()\n"
            "print(tp_hash(p6_net), tp_hash(g))",
            "hv = torch.autograd.functional.hvp(lambda z: p6_net(z).pow(2).sum(), "
            "p6_x.detach(), torch.ones_like(p6_x))\nprint(tp_hash(*hv))",
        ),
        model="p6_net",
    ),
    Probe(
        "custom_autograd_function",
        (
            "class P7Cube(torch.autograd.Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return x ** 3\n"
            "    @staticmethod\n"
            "    def backward(ctx, g):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return 3 * x ** 2 * g\n"
            "class P7(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__(); self.fc = nn.Linear(8, 8)\n"
            "    def forward(self, x, mutate=False):\n"
            "        h = self.fc(x); y = P7Cube.apply(h)\n"
            "        if mutate:\n"
            "            h.add_(1)\n"
            "        return y\n"
            "torch.manual_seed(0); p7_net = P7().to(DEVICE); p7_x, _ = tp_data()",
            "p7_net(p7_x).sum().backward(); print(tp_hash(p7_net))",
            "tp_try(lambda: p7_net(p7_x, mutate=True).sum().backward())",
        ),
        model="p7_net",
    ),
    Probe(
        "user_saved_tensors_hooks",
        (
            "p8_net = tp_mlp(); p8_x, p8_y = tp_data(); p8_packed = []\n"
            "def p8_pack(t):\n"
            "    p8_packed.append(tuple(t.shape)); return t.to('cpu')\n"
            "def p8_unpack(t):\n"
            "    return t.to(DEVICE)",
            "with torch.autograd.graph.saved_tensors_hooks(p8_pack, p8_unpack):\n"
            "    loss = F.mse_loss(p8_net(p8_x), p8_y)\n"
            "loss.backward(); print(len(p8_packed), sorted(set(p8_packed)), tp_hash(p8_net))",
            "with torch.autograd.graph.save_on_cpu(pin_memory=False):\n"
            "    loss = F.mse_loss(p8_net(p8_x), p8_y)\n"
            "loss.backward(); print(tp_hash(p8_net))",
        ),
        model="p8_net",
    ),
    Probe(
        "saved_tensor_register_hooks",
        (
            "p9_w = torch.randn(5, requires_grad=True, device=DEVICE)\n"
            "p9_y = p9_w.exp()\n"
            "p9_calls = []\n"
            "p9_y.grad_fn._raw_saved_result.register_hooks("
            "lambda t: (p9_calls.append('pack'), t)[1], "
            "lambda t: (p9_calls.append('unpack'), t)[1])\n"
            "p9_y.sum().backward(); print(p9_calls, tp_hash(p9_w.grad))",
            "p9_z = p9_w.sin()\nprint(tp_hash(p9_z.grad_fn._saved_self), "
            "p9_z.grad_fn._saved_self.requires_grad)",
        ),
    ),
    Probe(
        "checkpoint_non_reentrant",
        (
            "from torch.utils.checkpoint import checkpoint\n"
            "class P10(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__(); self.a = tp_mlp(); self.b = nn.Linear(4, 4)\n"
            "    def forward(self, x):\n"
            "        return self.b(checkpoint(self.a, x, use_reentrant=False))\n"
            "torch.manual_seed(0); p10_net = P10().to(DEVICE)\n"
            "p10_opt = torch.optim.SGD(p10_net.parameters(), lr=0.1)",
            "print(tp_train(p10_net, p10_opt))",
            "print(tp_train(p10_net, p10_opt))",
        ),
        model="p10_net",
    ),
    Probe(
        "checkpoint_reentrant",
        (
            "from torch.utils.checkpoint import checkpoint\n"
            "class P11(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__(); self.a = tp_mlp(); self.b = nn.Linear(4, 4)\n"
            "    def forward(self, x):\n"
            "        return self.b(checkpoint(self.a, x, use_reentrant=True))\n"
            "torch.manual_seed(0); p11_net = P11().to(DEVICE)\n"
            "p11_opt = torch.optim.SGD(p11_net.parameters(), lr=0.1)\n"
            "p11_x, p11_y = tp_data(); p11_x.requires_grad_(True)",
            "print(tp_train(p11_net, p11_opt, x=p11_x, y=p11_y))",
            "print(tp_train(p11_net, p11_opt, x=p11_x, y=p11_y))",
        ),
        model="p11_net",
    ),
    Probe(
        "user_module_hooks",
        (
            "p12_net = tp_mlp(); p12_x, p12_y = tp_data(); p12_seen = []\n"
            "p12_net[0].register_forward_pre_hook(lambda m, a: p12_seen.append('pre'))\n"
            "p12_net[2].register_forward_hook(lambda m, a, o: p12_seen.append(tuple(o.shape)))\n"
            "p12_net[4].register_full_backward_hook("
            "lambda m, gi, go: p12_seen.append(('bwd', tp_hash(go[0]))))\n"
            "p12_opt = torch.optim.SGD(p12_net.parameters(), lr=0.1)",
            "print(tp_train(p12_net, p12_opt, 2), p12_seen)",
            "p12_net[1].register_forward_hook(lambda m, a, o: o * 0)\n"
            "print(tp_hash(p12_net(p12_x)))",
        ),
        model="p12_net",
    ),
    Probe(
        "user_global_module_hooks",
        (
            "from torch.nn.modules import module as p13_mod\n"
            "p13_net = tp_mlp(); p13_x, _ = tp_data(); p13_calls = []\n"
            "p13_h = p13_mod.register_module_forward_hook("
            "lambda m, a, o: p13_calls.append(type(m).__name__))",
            "p13_net(p13_x).sum().backward(); print(p13_calls, tp_hash(p13_net))",
            "p13_h.remove(); p13_net(p13_x); print(len(p13_calls))",
        ),
        model="p13_net",
    ),
    Probe(
        "no_grad_and_inference_mode",
        (
            "p14_net = tp_mlp(); p14_x, _ = tp_data()",
            "with torch.no_grad():\n    a = p14_net(p14_x)\n"
            "with torch.inference_mode():\n    b = p14_net(p14_x)\n"
            "print(a.requires_grad, b.is_inference(), tp_hash(a, b))\n"
            "tp_try(lambda: b.add_(1))\n"
            "tp_try(lambda: p14_net(b).sum().backward())",
        ),
        model="p14_net",
    ),
    Probe(
        "func_grad_jacrev_hessian",
        (
            "from torch.func import grad, jacrev, hessian, vjp, jvp\n"
            "p15_x = torch.randn(4, device=DEVICE)\n"
            "def p15_f(x):\n    return (x.sin() * x).sum()",
            "print(tp_hash(grad(p15_f)(p15_x)), tp_hash(jacrev(torch.sin)(p15_x)), "
            "tp_hash(hessian(p15_f)(p15_x)))\n"
            "out, fn = vjp(torch.sin, p15_x); print(tp_hash(fn(torch.ones(4, device=DEVICE))[0]))\n"
            "print(tp_hash(*jvp(torch.sin, (p15_x,), (torch.ones(4, device=DEVICE),))))",
        ),
    ),
    Probe(
        "func_per_sample_gradients",
        (
            "from torch.func import functional_call, grad, vmap\n"
            "p16_net = tp_mlp(); p16_x, p16_y = tp_data()\n"
            "p16_params = {k: v.detach() for k, v in p16_net.named_parameters()}\n"
            "def p16_loss(params, x, y):\n"
            "    out = functional_call(p16_net, params, (x.unsqueeze(0),))\n"
            "    return F.mse_loss(out, y.unsqueeze(0))",
            "g = vmap(grad(p16_loss), in_dims=(None, 0, 0))(p16_params, p16_x, p16_y)\n"
            "print(tp_hash(*g.values()))",
            # a model ran earlier in the cell: the per-sample gradients must still work
            "F.mse_loss(p16_net(p16_x), p16_y).backward()\n"
            "g = vmap(grad(p16_loss), in_dims=(None, 0, 0))(p16_params, p16_x, p16_y)\n"
            "print(tp_hash(*g.values()), tp_hash(p16_net))",
        ),
        model="p16_net",
    ),
    Probe(
        "func_after_training_step",
        (
            "from torch.func import grad, hessian\n"
            "p17_net = tp_mlp(); p17_opt = torch.optim.SGD(p17_net.parameters(), lr=0.1)\n"
            "print(tp_train(p17_net, p17_opt, 1))",
            "p17_opt.zero_grad(); out = p17_net(tp_data()[0]); out.sum().backward()\n"
            "print(tp_hash(hessian(lambda z: (z ** 3).sum())(torch.ones(3, device=DEVICE))))\n"
            "p17_opt.step(); print(tp_hash(p17_net))",
        ),
        model="p17_net",
        steps=False,
    ),
    Probe(
        "forward_mode_ad",
        (
            "import torch.autograd.forward_ad as fwAD\np18_net = tp_mlp(); p18_x, _ = tp_data()",
            "with fwAD.dual_level():\n"
            "    d = fwAD.make_dual(p18_x, torch.ones_like(p18_x))\n"
            "    out = p18_net(d)\n"
            "    print(tp_hash(fwAD.unpack_dual(out).tangent))",
        ),
        model="p18_net",
    ),
    Probe(
        "transformers_gradient_checkpointing",
        (
            "from transformers import GPT2Config, GPT2LMHeadModel\n"
            "torch.manual_seed(0)\n"
            "p23_lm = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64,"
            " n_positions=32, attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)).to(DEVICE)\n"
            "p23_lm.gradient_checkpointing_enable()\np23_lm.train()\n"
            "p23_opt = torch.optim.AdamW(p23_lm.parameters(), lr=1e-3)\n"
            "p23_ids = torch.randint(0, 64, (2, 16), generator=torch.Generator()"
            ".manual_seed(3)).to(DEVICE)",
            "for _ in range(2):\n"
            "    p23_opt.zero_grad(); out = p23_lm(input_ids=p23_ids, labels=p23_ids)\n"
            "    out.loss.backward(); p23_opt.step()\n"
            "print(f'{out.loss.item():.6f}', tp_hash(p23_lm))",
            "out = p23_lm(input_ids=p23_ids, labels=p23_ids); out.loss.backward()\n"
            "print(tp_hash(p23_lm))",
        ),
        model="p23_lm",
        needs=("transformers",),
    ),
    Probe(
        "peft_lora",
        (
            "from peft import LoraConfig, get_peft_model\n"
            "torch.manual_seed(0)\n"
            "p24_base = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(DEVICE)\n"
            "p24_model = get_peft_model(p24_base, LoraConfig(r=4, target_modules=['0', '2'],"
            " init_lora_weights='gaussian'))\n"
            "p24_opt = torch.optim.AdamW([p for p in p24_model.parameters() if p.requires_grad],"
            " lr=1e-2)",
            "print(tp_train(p24_model, p24_opt))",
            "print(tp_train(p24_model, p24_opt))",
        ),
        model="p24_model",
        needs=("peft",),
    ),
    Probe(
        "tensor_subclass",
        (
            "class P25Tensor(torch.Tensor):\n"
            "    seen = []\n"
            "    @classmethod\n"
            "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
            "        cls.seen.append(getattr(func, '__name__', str(func)))\n"
            "        return super().__torch_function__(func, types, args, kwargs or {})\n"
            "p25_net = tp_mlp(); p25_x, _ = tp_data()",
            "x = p25_x.as_subclass(P25Tensor)\nout = p25_net(x)\nout.sum().backward()\n"
            "print(type(out).__name__, len(P25Tensor.seen), tp_hash(p25_net))",
        ),
        model="p25_net",
    ),
    Probe(
        "forward_that_raises",
        (
            "class P26(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__(); self.a = tp_mlp(); self.fail = True\n"
            "    def forward(self, x):\n"
            "        h = self.a(x)\n"
            "        if self.fail:\n"
            "            raise ValueError(f'boom at {tuple(h.shape)}')\n"
            "        return h\n"
            "p26_net = P26(); p26_x, _ = tp_data()",
            "p26_net(p26_x)",
            "p26_net.fail = False; p26_net(p26_x).sum().backward(); print(tp_hash(p26_net))",
            "tp_try(lambda: p26_net(torch.randn(3, 5, device=DEVICE)))",
        ),
        model="p26_net",
    ),
    Probe(
        "ddp_on_gloo",
        (
            "import torch.distributed as dist\n"
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "p27_file = _tp_tempfile.mktemp()\n"
            "dist.init_process_group('gloo', init_method='file://' + p27_file, rank=0,"
            " world_size=1)\n"
            "p27_ddp = DDP(tp_mlp()) if DEVICE == 'cpu' else DDP(tp_mlp(), device_ids=[0])\n"
            "p27_opt = torch.optim.SGD(p27_ddp.parameters(), lr=0.1)",
            "print(tp_train(p27_ddp, p27_opt))",
            "print(tp_train(p27_ddp, p27_opt)); dist.destroy_process_group()",
        ),
        model="p27_ddp",
    ),
    Probe(
        "anomaly_mode_nan",
        (
            "p28_net = tp_mlp(); p28_x, _ = tp_data()",
            "with torch.autograd.set_detect_anomaly(True):\n"
            "    out = p28_net(p28_x)\n"
            "    tp_try(lambda: (out - out.detach() - 1).clamp(max=-1).sqrt().sum().backward())\n"
            "print(tp_hash(p28_net))",
        ),
        model="p28_net",
    ),
    Probe(
        "backward_twice_and_retain_graph",
        (
            "p29_net = tp_mlp(); p29_x, _ = tp_data()",
            "loss = p29_net(p29_x).pow(2).sum(); loss.backward()\ntp_try(lambda: loss.backward())",
            "loss = p29_net(p29_x).pow(2).sum(); loss.backward(retain_graph=True)\n"
            "loss.backward(); print(tp_hash(p29_net))",
        ),
        model="p29_net",
    ),
    Probe(
        "kept_graphs_and_autocast",
        (
            "p30_net = tp_mlp(); p30_opt = torch.optim.SGD(p30_net.parameters(), lr=0.1)\n"
            "p30_losses = []",
            "for i in range(3):\n"
            "    x, y = tp_data(seed=i)\n"
            "    p30_losses.append(F.mse_loss(p30_net(x), y))\n"
            "sum(p30_losses).backward(); p30_opt.step(); print(tp_hash(p30_net))",
            "with torch.autocast(DEVICE, dtype=torch.bfloat16):\n"
            "    out = p30_net(tp_data()[0])\n"
            "print(out.dtype, tp_hash(out))",
        ),
        model="p30_net",
    ),
    Probe(
        "deepcopy_and_pickle_whole_model",
        (
            "import copy, io, pickle\n"
            "p32_net = tp_mlp(); p32_opt = torch.optim.SGD(p32_net.parameters(), lr=0.1)\n"
            "print(tp_train(p32_net, p32_opt))",
            "p32_ema = copy.deepcopy(p32_net)\nprint(tp_train(p32_ema, p32_opt), tp_hash(p32_ema))",
            "p32_buf = io.BytesIO(); torch.save(p32_net, p32_buf); p32_buf.seek(0)\n"
            "p32_back = torch.load(p32_buf, weights_only=False)\n"
            "print(type(p32_back).__name__, tp_hash(p32_back(tp_data()[0])))\n"
            "print(tp_hash(pickle.loads(pickle.dumps(p32_net))(tp_data()[0])))",
        ),
        model="p32_net",
        steps=False,
    ),
    Probe(
        "func_right_after_a_forward",
        (
            "from torch.func import jacrev, vmap\n"
            "class P33(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__(); self.fc = nn.Linear(8, 4)\n"
            "    def forward(self, x):\n"
            "        return torch.tanh(self.fc(x))\n"
            "torch.manual_seed(0); p33_net = P33().to(DEVICE)\n"
            "out = p33_net(tp_data()[0])  # built and run in one cell, graph kept\n"
            "print(tp_hash(jacrev(lambda z: p33_net(z).sum())(tp_data()[0])))",
            "out = p33_net(tp_data()[0])\n"
            "print(tp_hash(vmap(jacrev(torch.sin))(out.detach())))\n"
            "out.sum().backward(); print(tp_hash(p33_net))",
        ),
        model="p33_net",
    ),
    Probe(
        "user_saved_tensors_hooks_pushed_by_root_module_hooks",
        (
            "from torch.func import grad\n"
            "p57_net = tp_mlp(); p57_x, _ = tp_data(); p57_packed = []\n"
            "p57_ctx = torch.autograd.graph.saved_tensors_hooks("
            "lambda t: (p57_packed.append(1), t)[1], lambda t: t)\n"
            "_ = p57_net.register_forward_pre_hook(lambda m, a: p57_ctx.__enter__())\n"
            "_ = p57_net.register_forward_hook(lambda m, a, o: p57_ctx.__exit__(None, None, None))",
            "out = p57_net(p57_x)\n"
            "print(len(p57_packed), torch._C._autograd._top_saved_tensors_default_hooks(False))\n"
            "tp_try(lambda: grad(lambda z: z.sin().sum())(p57_x))\n"
            "out.sum().backward(); print(tp_hash(p57_net))",
        ),
        model="p57_net",
        steps=False,
    ),
    Probe(
        "optimizer_step_in_backward",
        (
            "p46_net = tp_mlp(); p46_x, p46_y = tp_data()\n"
            "p46_opts = {p: torch.optim.SGD([p], lr=0.1) for p in p46_net.parameters()}\n"
            "def p46_hook(p):\n"
            "    p46_opts[p].step(); p46_opts[p].zero_grad()\n"
            "for p in p46_net.parameters():\n"
            "    _ = p.register_post_accumulate_grad_hook(p46_hook)",
            "for _ in range(3):\n"
            "    F.mse_loss(p46_net(p46_x), p46_y).backward()\n"
            "print(tp_hash(p46_net))",
            "print(tp_modes())\nfor _ in range(3):\n"
            "    F.mse_loss(p46_net(p46_x), p46_y).backward()\n"
            "print(tp_hash(p46_net))",
            "print(tp_modes())",
        ),
        model="p46_net",
    ),
    Probe(
        "jit_trace_warnings_and_graph",
        (
            "p41_net = tp_mlp(); p41_x, _ = tp_data()",
            "p41_t = tp_warns(lambda: torch.jit.trace(p41_net, p41_x))\n"
            "print(len(list(p41_t.graph.nodes())), tp_hash(p41_t(p41_x)))",
        ),
        model="p41_net",
    ),
    Probe(
        "first_compile_inside_a_step",
        (
            "p47_net = tp_mlp(); p47_opt = torch.optim.SGD(p47_net.parameters(), lr=0.1)\n"
            "p47_c = TpCount()\n"
            "@torch.compile(backend=p47_c)\n"
            "def p47_loss(out, y):\n"
            "    return ((out - y) ** 2).mean() + out.abs().mean()",
            "print(tp_train(p47_net, p47_opt, loss_fn=p47_loss), p47_c)",
            "print(tp_train(p47_net, p47_opt, loss_fn=p47_loss), p47_c)",
        ),
        model="p47_net",
    ),
    Probe(
        "dispatch_mode_of_the_users_around_backward_and_step",
        (
            "from torch.utils.flop_counter import FlopCounterMode\n"
            "p45_net = tp_mlp(); p45_opt = torch.optim.SGD(p45_net.parameters(), lr=0.1)\n"
            "p45_x, p45_y = tp_data()",
            "p45_opt.zero_grad(); loss = F.mse_loss(p45_net(p45_x), p45_y)\n"
            "with FlopCounterMode(display=False) as fc:\n"
            "    loss.backward(); p45_opt.step()\n"
            "print(fc.get_total_flops(), tp_hash(p45_net))",
            "print(tp_modes())\nprint(tp_train(p45_net, p45_opt), tp_modes())",
            "c = TpCount(); f = torch.compile(lambda a: (a.sin() * 2).sum(), backend=c)\n"
            "print(tp_hash(f(p45_x)), c, tp_modes())",
        ),
        model="p45_net",
        steps=False,
    ),
    Probe(
        "compile_module",
        (
            "p19_net = tp_mlp(); p19_x, p19_y = tp_data(); p19_c = TpCount()\n"
            "p19_cm = torch.compile(p19_net, backend=p19_c)",
            "loss = F.mse_loss(p19_cm(p19_x), p19_y); loss.backward()\n"
            "print(p19_c, tp_hash(p19_net))",
            "p19_cm(p19_x).sum().backward(); print(p19_c, tp_hash(p19_net))",
        ),
        model="p19_net",
    ),
    Probe(
        "compile_function",
        (
            "p20_c = TpCount()\n"
            "@torch.compile(backend=p20_c)\n"
            "def p20_f(x, w):\n"
            "    return (torch.tanh(x @ w) * 2).relu().sum()\n"
            "p20_w = torch.randn(8, 3, device=DEVICE, requires_grad=True)",
            "p20_f(tp_data()[0], p20_w).backward(); print(p20_c, tp_hash(p20_w.grad))",
            "p20_f(tp_data()[0], p20_w).backward(); print(p20_c, tp_hash(p20_w.grad))",
        ),
    ),
    Probe(
        "compile_measured_model",
        (
            "p21_net = tp_mlp(); p21_opt = torch.optim.Adam(p21_net.parameters(), lr=1e-2)\n"
            "print(tp_train(p21_net, p21_opt))",
            "print(tp_train(p21_net, p21_opt))",
            "p21_c = TpCount(); p21_cm = torch.compile(p21_net, backend=p21_c)\n"
            "print(tp_train(p21_cm, p21_opt), p21_c)",
            "print(tp_train(p21_cm, p21_opt), p21_c)",
        ),
        model="p21_net",
    ),
    Probe(
        "compile_module_method",
        (
            "p22_net = tp_mlp(); p22_c = TpCount(); p22_net.compile(backend=p22_c)\n"
            "p22_opt = torch.optim.SGD(p22_net.parameters(), lr=0.1)",
            "print(tp_train(p22_net, p22_opt), p22_c)",
            "print(tp_train(p22_net, p22_opt), p22_c)",
        ),
        model="p22_net",
    ),
    Probe(
        "compile_built_and_run_in_one_cell",
        (
            "class P34(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__(); self.a = nn.Linear(8, 8); self.b = nn.Linear(8, 4)\n"
            "    def forward(self, x):\n"
            "        return self.b(F.gelu(self.a(x)))\n"
            "torch.manual_seed(0); p34_net = P34().to(DEVICE); p34_c = TpCount()\n"
            "p34_net.compile(backend=p34_c)\n"
            "p34_net(tp_data()[0]).sum().backward(); print(p34_c, tp_hash(p34_net))",
            "p34_net(tp_data()[0]).sum().backward(); print(p34_c, tp_hash(p34_net))",
        ),
    ),
    Probe(
        "compiled_loss_inside_a_training_step",
        (
            "p35_net = tp_mlp(); p35_opt = torch.optim.SGD(p35_net.parameters(), lr=0.1)\n"
            "p35_c = TpCount()\n"
            "@torch.compile(backend=p35_c)\n"
            "def p35_loss(out, y):\n"
            "    return ((out - y) ** 2).mean() + out.abs().mean()\n"
            "print(tp_train(p35_net, p35_opt, loss_fn=p35_loss), p35_c)",
            "print(tp_train(p35_net, p35_opt, loss_fn=p35_loss), p35_c)",
            "print(tp_train(p35_net, p35_opt, 2, x=torch.randn(3, 8, device=DEVICE), "
            "y=torch.zeros(3, 4, device=DEVICE), loss_fn=p35_loss), p35_c)",
        ),
        model="p35_net",
    ),
    Probe(
        "compiled_submodule_in_an_eager_model",
        (
            "class P36(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__(); self.inner = nn.Sequential(nn.Linear(8, 8), nn.GELU())\n"
            "        self.head = nn.Linear(8, 4)\n"
            "    def forward(self, x):\n"
            "        return self.head(self.inner(x))\n"
            "torch.manual_seed(0); p36_net = P36().to(DEVICE); p36_c = TpCount()\n"
            "p36_net.inner = torch.compile(p36_net.inner, backend=p36_c)\n"
            "p36_opt = torch.optim.SGD(p36_net.parameters(), lr=0.1)",
            "print(tp_train(p36_net, p36_opt), p36_c)",
            "print(tp_train(p36_net, p36_opt), p36_c)",
        ),
        model="p36_net",
    ),
    Probe(
        "amp_gradscaler_and_reduce_overhead",
        (
            "p31_net = tp_mlp(); p31_opt = torch.optim.SGD(p31_net.parameters(), lr=0.1)\n"
            "p31_scaler = torch.amp.GradScaler('cuda')\np31_x, p31_y = tp_data()",
            "for _ in range(3):\n"
            "    p31_opt.zero_grad()\n"
            "    with torch.autocast('cuda', dtype=torch.float16):\n"
            "        loss = F.mse_loss(p31_net(p31_x), p31_y)\n"
            "    p31_scaler.scale(loss).backward(); p31_scaler.step(p31_opt); p31_scaler.update()\n"
            "print(tp_hash(p31_net), p31_scaler.get_scale())",
            "p31_cm = torch.compile(p31_net, mode='reduce-overhead')\n"
            "with torch.no_grad():\n"
            "    outs = [p31_cm(p31_x).clone() for _ in range(3)]\n"
            "print(tp_hash(*outs))",
        ),
        model="p31_net",
        cuda_only=True,
    ),
)
