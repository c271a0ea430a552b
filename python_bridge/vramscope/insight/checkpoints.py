"""Non-reentrant activation checkpointing (``torch.utils.checkpoint(..., use_reentrant=False)``)
as seen from the activation tracker and the holders scan.

Inside a checkpointed region torch's own saved-tensor hooks replace every saved tensor with a
small ``_Holder``; what the region really keeps for its recomputation are its *inputs*, saved
by the region's ``_CheckpointFrame.save_inputs`` through the default hooks, i.e. ours while a
forward is measured. So:

* :func:`frame_saving_inputs` recognises, from our pack hook, a tensor saved by
  ``save_inputs`` and returns that frame: the tracker keeps a weak reference to it.
* :func:`frame_inputs` lists the tensors a frame keeps, and :func:`holder_frames` maps each
  live ``_Holder`` of the known frames to its frame, so the holders scan charges the inputs
  to the variable whose autograd graph reaches the region.
* :func:`in_region` tells whether a module's forward runs inside a region (torch's
  checkpoint hooks are on top of the thread's saved-tensor hooks stack).

These read private torch structures (stable from torch 2.1 to 2.13 at least); every helper
returns "nothing" when they are not as expected.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Iterable, Iterator
from typing import Any, Optional

import torch

_CHECKPOINT_FILE = "checkpoint.py"
_HOOK_QUALNAME = "_checkpoint_hook."


#: The names of the frames that save a region's inputs through our pack hook:
#: ``save_inputs`` itself, or the comprehension inside it (Python < 3.12).
SAVING_FRAMES = frozenset({"save_inputs", "<listcomp>", "<genexpr>"})


def frame_saving_inputs(caller: types.FrameType) -> Optional[Any]:
    """The ``_CheckpointFrame`` whose ``save_inputs`` is saving the tensor our pack hook got
    (``caller``: the Python frame whose op called the pack hook; the pack hook checks its
    name against :data:`SAVING_FRAMES` first)."""
    frame: Optional[types.FrameType] = caller
    for _ in range(2):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_name == "save_inputs" and code.co_filename.endswith(_CHECKPOINT_FILE):
            owner = frame.f_locals.get("self")
            return owner if hasattr(owner, "weak_holders") else None
        frame = frame.f_back
    return None


def in_region(top: tuple[Any, Any]) -> bool:
    """A checkpointed region's forward is running on this thread (``top``: the thread's top
    saved-tensor hooks, ``torch._C._autograd._top_saved_tensors_default_hooks(False)``)."""
    return _HOOK_QUALNAME in getattr(top[0], "__qualname__", "")


def frame_inputs(frame: Any) -> Iterator[torch.Tensor]:
    """The tensors a region keeps for its recomputation (its saved inputs), unpacked only
    when they were saved without hooks or by ours (a detached tensor)."""
    for arg in getattr(frame, "saved_args", ()) or ():
        data = arg
        if isinstance(arg, torch._C._autograd.SavedTensor):
            try:
                data = arg.data  # type: ignore[attr-defined]  # the packed object, no unpack
            except Exception:
                continue
        data = getattr(data, "tensor", data)  # packed by the activation tracker: saved.Saved
        if isinstance(data, torch.Tensor):
            yield data


def frame_of(saved: Any) -> Optional[Any]:
    """The ``_CheckpointFrame`` of a region's saved slot (a ``SavedTensor`` whose packed value
    is a ``_Holder``): the region's unpack hook holds it. None for any other slot."""
    try:
        hook = saved.unpack_hook
    except Exception:
        return None
    if _HOOK_QUALNAME not in getattr(hook, "__qualname__", ""):
        return None
    for cell in getattr(hook, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if hasattr(value, "weak_holders"):
            return value
    return None


def holder_frames(frames: Iterable[Any]) -> dict[int, Any]:
    """``id(_Holder) -> frame`` for every live holder of ``frames``."""
    out: dict[int, Any] = {}
    for frame in frames:
        for ref in list(getattr(frame, "weak_holders", ()) or ()):
            holder = ref() if isinstance(ref, weakref.ref) else None
            if holder is not None:
                out[id(holder)] = frame
    return out


def is_holder(value: Any) -> bool:
    """A checkpoint ``_Holder`` (what a region saves instead of a tensor)."""
    return type(value).__name__ == "_Holder" and hasattr(value, "handles")
