"""Transparency probes with ``torch.jit`` and ``torch.compile``: they come last, since once
Dynamo has compiled anything the step watch follows no step op by op (vramscope/compiled.py)."""

from __future__ import annotations

from probe_type import Probe

COMPILE: tuple[Probe, ...] = (
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
