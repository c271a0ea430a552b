"""Protocol shapes of the Optimize messages (docs/protocol.md, "Optimize (since 1.1)").

``protocol.py`` imports the messages, the ``optimize`` package the parts; no torch here.
Mirrors ``src/messages/optimize.ts``.
"""

from __future__ import annotations

from typing import Literal, TypedDict

SuggestionKind = Literal["enable", "rewrite", "template", "free"]
SearchState = Literal["running", "done", "failed"]
#: since 1.2: pending (no training run after it yet), met, missed (> 20% off either
#: prediction), undone (the run after it re-created what the suggestion changed)
OutcomeVerdict = Literal["pending", "met", "missed", "undone"]


class CellRef(TypedDict):
    cell_id: str | None
    execution_count: int | None


class Names(TypedDict):
    model: str | None
    optimizer: str | None
    loss_fn: str | None
    data: str | None
    batch: str | None


class Predicted(TypedDict):
    activation_bytes_before: int | None
    activation_bytes_after: int | None
    saving_bytes: int
    step_peak_saving_bytes: int | None
    saving_fraction: float | None


class Cost(TypedDict):
    text: str
    factor: float | None


class _SuggestionFields(TypedDict):
    id: str
    technique: str
    title: str
    why: list[str]
    predicted: Predicted
    cost: Cost
    kind: SuggestionKind
    code: str
    undo_code: str | None
    target_cell: CellRef | None


class Suggestion(_SuggestionFields, total=False):
    #: since 1.2: the suggestion was applied (its card stays, with its undo cell)
    applied: bool


class Mistake(TypedDict):
    id: str
    title: str
    why: str
    fix_code: str | None
    cell_id: str | None
    execution_count: int | None


class Measured(TypedDict):
    activation_bytes: int
    step_peak_bytes: int | None  # null unless both runs of the outcome had a measured step
    duration_s: float
    cell_id: str | None
    execution_count: int | None


class Outcome(TypedDict):
    suggestion_id: str
    technique: str
    title: str
    predicted: Predicted
    before: Measured | None
    after: Measured | None
    miss_fraction: float | None
    missed: bool
    #: since 1.2: |measured step-peak saving - predicted| / predicted (null: not compared)
    step_peak_miss_fraction: float | None
    verdict: OutcomeVerdict
    #: since 1.2: why the verdict is what it is, in words (null: nothing to add)
    note: str | None
    #: since 1.2: a "free" suggestion's cell gave back these bytes (its memory's fall);
    #: null for the other kinds
    freed_bytes: int | None


class Advice(TypedDict):
    model: str | None
    training_cell: CellRef | None
    names: Names
    suggestions: list[Suggestion]
    mistakes: list[Mistake]
    outcomes: list[Outcome]
    notes: list[str]
    finder_code: str | None
    compute_ms: float


class AdviceMessage(TypedDict):
    type: Literal["advice"]
    advice: Advice


class Trial(TypedDict):
    batch_size: int
    peak_bytes: int | None
    fits: bool
    oom: bool


class BatchSearch(TypedDict):
    search_id: str
    state: SearchState
    device: str
    budget_bytes: int
    tried: list[Trial]
    batch_size: int | None
    accumulation_steps: int | None
    target_batch: int | None
    message: str | None


class BatchSearchMessage(TypedDict):
    type: Literal["batch_search"]
    search: BatchSearch
