"""One probe of the transparency suite (transparency_probes.py says what they are)."""

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
