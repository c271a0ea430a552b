"""Transparency probes: autograd itself (in-place checks, double backward, custom Functions,
saved-tensor hooks, checkpointing, module hooks, no_grad, ``torch.func``, forward-mode AD), and
the optimizers and ``accelerate`` loop they run in."""

from __future__ import annotations

from probe_type import Probe

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


CORE: tuple[Probe, ...] = (
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
)
