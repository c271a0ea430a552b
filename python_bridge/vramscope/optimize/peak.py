"""A training step's peak memory: the CUDA allocator's peak, or (any device) the bytes of the
tensors the step allocated, followed op by op through a dispatch mode.

The op-by-op count is allocator-independent: a storage counts from the op that created it
until it is freed (a weakref finalizer on the storage), views and in-place results of an
op's inputs are not new memory.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable


def _tracker_class(torch: Any) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    Tensor, strided = torch.Tensor, torch.strided

    def _storages(args: Any, kwargs: Any) -> set[int]:
        """The storages of an op's tensor arguments (and of tensors in list arguments)."""
        found = set()
        for group in (args, kwargs.values() if kwargs else ()):
            for a in group:
                if isinstance(a, Tensor):
                    if a.layout == strided:
                        found.add(a.untyped_storage().data_ptr())
                elif isinstance(a, (list, tuple)):
                    for b in a:
                        if isinstance(b, Tensor) and b.layout == strided:
                            found.add(b.untyped_storage().data_ptr())
        return found

    aten = torch.ops.aten
    softmax_ops = {aten._softmax.default, aten.softmax.int}
    graph_task = torch._C._current_graph_task_id
    float32, uint8 = torch.float32, torch.uint8
    top_hooks = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)

    def in_checkpoint() -> bool:
        """Inside a non-reentrant checkpointed region: its saved-tensor hooks are on top."""
        try:
            top: Any = top_hooks(False) if top_hooks is not None else None
        except Exception:
            return False
        return bool(top) and "_checkpoint_hook" in getattr(top[0], "__qualname__", "")

    rnn_workspace_ops = {aten.mkldnn_rnn_layer.default}
    no_torch_function = torch._C.DisableTorchFunction

    class StepPeak(TorchDispatchMode):
        def __init__(self, record: bool = False) -> None:
            super().__init__()
            self.live: dict[int, int] = {}
            self.current = 0
            self.peak = 0
            self.closed = False  # gone through: a mode left pushed by accident counts nothing
            self.failed = False  # the count broke off (an op's result it could not read)
            # with ``record``: every allocation (key, +bytes) and free (key, -bytes) in order
            self.events: list[tuple[int, int]] | None = [] if record else None
            # with ``record``, attention-like score matrices made in the forward: square
            # softmax outputs ([..., T, T]) by storage; ``attention``: their bytes and the
            # bytes of one float32 per row (what a fused kernel keeps instead: logsumexp)
            self.scores: set[int] = set()
            self.attention = [0, 0]
            self._refs: dict[Any, int] = {}  # weakref to a storage -> its key
            # with ``record``, the forward replayed under 16-bit autocast (autocast_rule,
            # below): the float32 storages it would make 16-bit, the 16-bit copies it would
            # make of float32 inputs, and (real, autocast) bytes at backward's start
            self.low: set[int] = set()
            self.workspaces: set[int] = set()  # oneDNN RNN workspaces (bytes, not floats)
            # the model's outputs (set by the step watch): held by the user's variables, not
            # saved for backward, so left out of the figures at backward's start
            self.outputs: set[int] = set()
            self.replaced: set[int] = set()
            self.cast_sources: set[int] = set()  # weights and inputs cast (once: the cache)
            self.cast_bytes = 0
            self.boundary: tuple[int, int] | None = None

        def _forget(self, key: int) -> None:
            self.low.discard(key)
            self.workspaces.discard(key)
            self.replaced.discard(key)
            self.outputs.discard(key)

        def _gone(self, ref: Any) -> None:
            key = self._refs.pop(ref, 0)
            nbytes = self.live.pop(key, 0)
            self._forget(key)
            self.current -= nbytes
            if nbytes and self.events is not None and not self.closed:
                self.events.append((key, -nbytes))

        @classmethod
        def ignore_compile_internals(cls) -> bool:
            """Dynamo compiles as if this mode were not there (a function first compiled
            inside a measured step compiles as in a plain kernel); its ops still come here."""
            return True

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            out = func(*args, **(kwargs or {}))
            if not self.closed:
                try:
                    with no_torch_function():  # unseen by the user's tensor subclasses
                        self._count(func, args, kwargs, out)
                except Exception:  # never into the user's op: this measurement stops
                    self.closed = self.failed = True
            return out

        def _count(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
            inputs: set[int] | None = None  # made only when an output is not a known storage
            outs = out if isinstance(out, (tuple, list)) else (out,)
            low: bool | None = None  # under autocast, would this op's outputs be 16-bit?
            if self.events is not None and self.boundary is None:
                if graph_task() != -1:  # backward starts: what the forward left
                    self._at_boundary()
                else:
                    low = self._lowered(func, args, kwargs, outs)
            for t in outs:
                if not isinstance(t, Tensor) or t.layout != strided:
                    continue
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if not key or key in self.live:
                    continue  # a view or in-place result of a tensor made in the step
                if inputs is None:
                    inputs = _storages(args, kwargs)
                if key in inputs:
                    continue  # ... of a tensor from before the step
                nbytes = storage.nbytes()
                self._forget(key)  # a new storage where a freed one was
                if low and t.dtype == float32:
                    self.low.add(key)
                elif low and func in rnn_workspace_ops and t.dtype == uint8:
                    self.workspaces.add(key)
                self.live[key] = nbytes
                self.current += nbytes
                if self.current > self.peak:
                    self.peak = self.current
                if self.events is not None:
                    self.events.append((key, nbytes))
                self._refs[weakref.ref(storage, self._gone)] = key
            if self.events is not None and func in softmax_ops:
                self._scores(out)

        def _lowered(self, func: Any, args: Any, kwargs: Any, outs: Any) -> bool:
            """Whether autocast would make this forward op's outputs 16-bit; for an op it
            runs in 16 bits, the copies it would make of float32 inputs are kept in
            ``cast_bytes``: one per weight or input from before the step (autocast's cast
            cache), one per call for an activation (no cache; the copy is what autograd
            saves)."""
            device = next((t.device.type for t in outs if isinstance(t, Tensor)), "cpu")
            rule = autocast_rule(func, device)
            tensors = [
                a
                for group in (args, kwargs.values() if kwargs else ())
                for item in group
                for a in (item if isinstance(item, (list, tuple)) else (item,))
                if isinstance(a, Tensor) and a.is_floating_point() and a.layout == strided
            ]
            if rule == "lower":
                if in_checkpoint():
                    return True  # nothing in a checkpointed region is saved: nor its copies
                for a in tensors:
                    key = a.untyped_storage().data_ptr()
                    if a.dtype != float32 or key in self.low:
                        continue
                    if key in self.live:
                        # an activation: every call casts it again (no cache), and the copy
                        # is what the op saves, so the float32 original is counted no more
                        # (its other users keep it in practice only when they save it too)
                        self.replaced.add(key)
                    elif key in self.cast_sources:
                        continue  # a weight or input: cast once (autocast's cache)
                    else:
                        self.cast_sources.add(key)
                    self.cast_bytes += a.numel() * 2
                return True
            if rule == "fp32" or not tensors:
                return False
            if rule == "promote":
                # PyTorch's type promotion, where 0-dim tensors do not count; nor do vectors
                # from before the step: a bias added after a matmul is a lowered linear's
                # (linear on a 3-d input runs as mm + add, and autocast cast the bias too)
                dims = [
                    a
                    for a in tensors
                    if a.dim() > 1 or (a.dim() == 1 and a.untyped_storage().data_ptr() in self.live)
                ]
                return all(self._is_low(a) for a in dims or tensors)
            return self._is_low(tensors[0])  # the op follows its input's dtype

        def _is_low(self, t: Any) -> bool:
            return t.dtype != float32 or t.untyped_storage().data_ptr() in self.low

        def _at_boundary(self) -> None:
            # a copy first (one C-level call): iterating ``live`` itself allocates, which can
            # run the garbage collector, whose storage finalizers (_gone) pop from ``live``
            # ("dictionary changed size during iteration": the step's figures were lost)
            snapshot = self.live.copy()
            live = {k: n for k, n in snapshot.items() if k not in self.outputs}
            real = sum(live.values())
            kept = sum(
                0
                if key in self.replaced
                else n // 2
                if key in self.low
                else int(n * RNN_WORKSPACE_16BIT)
                if key in self.workspaces
                else n
                for key, n in live.items()
            )
            self.boundary = (real, kept + self.cast_bytes)

        def _scores(self, out: Any) -> None:
            if graph_task() != -1 or not isinstance(out, Tensor):
                return  # in backward
            shape = out.shape
            key = out.untyped_storage().data_ptr()
            if len(shape) >= 2 and shape[-1] == shape[-2] > 1 and key not in self.scores:
                self.scores.add(key)
                self.attention[0] += out.numel() * out.element_size()
                self.attention[1] += out.numel() // shape[-1] * 4

    return StepPeak


#: Forward ops as a dispatch mode sees them (after decomposition), by what autocast does to
#: them: "lower" runs them in 16 bits (matmuls, convolutions, attention, RNN layers),
#: "fp32" in float32 (per device: losses on CPU; also norms, softmax and more on CUDA),
#: "promote" gives the widest input dtype; any other op follows its first input's dtype
#: (measured on CPU: norms, activations, pooling, dropout and reductions of a bf16 input
#: stay bf16; the losses come out float32).
AUTOCAST_LOWER = frozenset(
    [
        "addmm",
        "mm",
        "bmm",
        "baddbmm",
        "addbmm",
        "addmv",
        "addr",
        "matmul",
        "linear",
        "convolution",
        "_convolution",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_tbc",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "mkldnn_rnn_layer",
        "_cudnn_rnn",
        "prelu",
        "_native_multi_head_attention",
        "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_efficient_attention_forward",
        "_flash_attention_forward",
    ]
)
AUTOCAST_FP32_CPU = frozenset(
    [
        "nll_loss",
        "nll_loss_forward",
        "nll_loss2d",
        "nll_loss2d_forward",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "kl_div",
        "cross_entropy_loss",
        "_log_softmax",
        "log_softmax",
        "soft_margin_loss",
        "multilabel_margin_loss_forward",
        "multi_margin_loss",
        "poisson_nll_loss",
        "ctc_loss",
        "cosine_embedding_loss",
        "hinge_embedding_loss",
        "margin_ranking_loss",
        "triplet_margin_loss",
    ]
)
AUTOCAST_FP32_CUDA = AUTOCAST_FP32_CPU | frozenset(
    [
        "native_layer_norm",
        "layer_norm",
        "native_group_norm",
        "group_norm",
        "_softmax",
        "softmax",
        "_fused_rms_norm",
        "rms_norm",
        "pow",
        "exp",
        "log",
        "log10",
        "log2",
        "log1p",
        "expm1",
        "reciprocal",
        "rsqrt",
        "acos",
        "asin",
        "cosh",
        "sinh",
        "tan",
        "erfinv",
        "softplus",
        "norm",
        "linalg_vector_norm",
        "cumsum",
        "cumprod",
        "sum",
        "prod",
        "dist",
        "pdist",
        "cdist",
        "renorm",
        "logsumexp",
        "cosine_similarity",
    ]
)
AUTOCAST_PROMOTE = frozenset(
    [
        "add",
        "sub",
        "mul",
        "div",
        "rsub",
        "where",
        "maximum",
        "minimum",
        "atan2",
        "cat",
        "stack",
        "addcmul",
        "addcdiv",
        "index_put",
        "scatter_add",
        "index_copy",
        "lerp",
    ]
)


def autocast_rule(func: Any, device: str) -> str:
    """ "lower", "fp32", "promote" or "follow" for an aten op on ``device``. _log_softmax
    counts as float32 on CPU too: it is how cross_entropy (float32 under autocast) runs."""
    name = getattr(getattr(func, "overloadpacket", None), "__name__", "")
    if name in AUTOCAST_LOWER:
        return "lower"
    if name in (AUTOCAST_FP32_CUDA if device == "cuda" else AUTOCAST_FP32_CPU):
        return "fp32"
    if name in AUTOCAST_PROMOTE:
        return "promote"
    return "follow"


#: oneDNN's LSTM workspace (a uint8 buffer of mkldnn_rnn_layer, saved for backward) under
#: 16-bit autocast, as a share of its float32 size: measured 0.704, 0.720 and 0.717 on three
#: LSTM shapes (input/hidden/steps/batch 64/128/40/16, 32/256/10/4, 16/512/5/32)
RNN_WORKSPACE_16BIT = 0.71

_CLASSES: dict[int, Any] = {}


def tracker(torch: Any, record: bool = False) -> Any:
    """A new op-by-op peak tracker (a ``TorchDispatchMode``; the class is made once)."""
    cls = _CLASSES.get(id(torch))
    if cls is None:
        cls = _CLASSES[id(torch)] = _tracker_class(torch)
    return cls(record)


def measure_peak(torch: Any, device: Any, step: Callable[[], Any]) -> int:
    """Peak bytes ``step`` added on ``device`` above what was allocated when it started."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return max(0, int(torch.cuda.max_memory_allocated(device)) - base)
    mode = tracker(torch)
    with mode:
        step()
    if mode.failed:
        raise RuntimeError("the step's peak could not be followed op by op on this device")
    return int(mode.peak)
