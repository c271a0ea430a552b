"""Transparency probes: what users run around autograd (``transformers`` with gradient
checkpointing, ``peft`` LoRA, tensor subclasses, a forward that raises, DDP on gloo, anomaly mode,
kept graphs, copies of a model, hooks and modes of their own)."""

from __future__ import annotations

from probe_type import Probe

USAGE: tuple[Probe, ...] = (
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
        # the bootstrap binds no name: the user's namespace (and so when its dict grows, and
        # what `dir()`, `%who` and `globals()` show) is a plain kernel's; the armed kernel's
        # own `_tpv*` names (the suite arms advice with them) are left out
        "user_namespace_untouched",
        (
            "p58_names = sorted(n for n in globals() if not n.startswith('_tpv'))\n"
            "print(len(p58_names), [n for n in p58_names if n.startswith('_')])\n"
            "print(_tp_hashlib.sha256(' '.join(p58_names).encode()).hexdigest()[:16])",
        ),
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
        # a TorchScript function that forks: its saves run on the fork's thread, which has
        # no Python frame (the bridge's pack hook once raised there)
        "jit_fork_inside_forward",
        (
            "@torch.jit.script\n"
            "def p59_branch(x: torch.Tensor) -> torch.Tensor:\n"
            "    return (x * x).sin()\n"
            "@torch.jit.script\n"
            "def p59_fanout(x: torch.Tensor) -> torch.Tensor:\n"
            "    fut = torch.jit.fork(p59_branch, x)\n"
            "    return p59_branch(x) + torch.jit.wait(fut)\n"
            "class P59(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.fc = nn.Linear(8, 8)\n"
            "    def forward(self, x):\n"
            "        return p59_fanout(self.fc(x))\n"
            "torch.manual_seed(0)\n"
            "p59_net = P59().to(DEVICE)\n"
            "p59_x = torch.randn(4, 8, device=DEVICE)\n"
            "p59_opt = torch.optim.SGD(p59_net.parameters(), lr=0.1)",
            "def p59_step():\n"
            "    p59_opt.zero_grad()\n"
            "    p59_net(p59_x).sum().backward()\n"
            "    p59_opt.step()\n"
            "for _ in range(3):\n"
            "    tp_try(p59_step)\n"
            "print(tp_hash(p59_net))",
        ),
        model="p59_net",
    ),
    Probe(
        # a physics-informed network: its own forward takes derivatives with torch.func.grad
        # and jacrev (through a method), which refuse to start under saved-tensor hooks
        "torch_func_inside_forward",
        (
            "from torch.func import jacrev as p60_jacrev\n"
            "class P60(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.u = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))\n"
            "    def _jac(self, xy):\n"
            "        return p60_jacrev(lambda p: self.u(p).sum())(xy)\n"
            "    def forward(self, xy):\n"
            "        du = torch.func.grad(lambda p: self.u(p).sum())(xy)\n"
            "        return self.u(xy), du, self._jac(xy)\n"
            "torch.manual_seed(0)\n"
            "p60_net = P60().to(DEVICE)\n"
            "p60_xy = torch.randn(16, 2, device=DEVICE)\n"
            "p60_opt = torch.optim.Adam(p60_net.parameters(), lr=1e-2)",
            "def p60_step():\n"
            "    p60_opt.zero_grad()\n"
            "    u, du, j = p60_net(p60_xy)\n"
            "    loss = u.square().mean() + (du - 1).square().mean() + j.square().mean()\n"
            "    loss.backward()\n"
            "    p60_opt.step()\n"
            "    return f'{loss.item():.6f}'\n"
            "for _ in range(3):\n"
            "    tp_try(p60_step)\n"
            "print(tp_hash(p60_net))",
        ),
        model="p60_net",
    ),
)
