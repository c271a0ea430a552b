/**
 * Optimize (since 1.1): advice, suggestions, outcomes and the batch-size search (docs/protocol.md, "Optimize").
 */
import type { DeviceId } from '../protocol';

/** A recorded cell, by JupyterLab cell id and execution count. */
export interface ICellRef {
  cell_id: string | null;
  execution_count: number | null;
}

/** The user's variables the advice's cells are written with. */
export interface IAdviceNames {
  model: string | null;
  optimizer: string | null;
  loss_fn: string | null;
  /** Data loader / dataset. */
  data: string | null;
  /** The batch (or input) variable of the training loop. */
  batch: string | null;
}

/** A suggestion's predicted effect (bytes), from what was measured. */
export interface IPredicted {
  activation_bytes_before: number | null;
  activation_bytes_after: number | null;
  saving_bytes: number;
  step_peak_saving_bytes: number | null;
  /** saving / activation_bytes_before (0..1). */
  saving_fraction: number | null;
}

export type SuggestionKind = 'enable' | 'rewrite' | 'template' | 'free';

export interface ISuggestion {
  /** Stable per technique and target, e.g. "checkpoint:model.blocks". */
  id: string;
  technique: string;
  title: string;
  /** The measured facts it rests on. */
  why: string[];
  predicted: IPredicted;
  cost: { text: string; factor: number | null };
  kind: SuggestionKind;
  /** The cell text (plain PyTorch; first line `# vramscope: <id>`). */
  code: string;
  undo_code: string | null;
  target_cell: ICellRef | null;
  /** Since 1.2: applied; its card stays (with its undo cell) after it is no longer offered. */
  applied?: boolean;
}

export interface IMistake {
  id: string;
  title: string;
  why: string;
  fix_code: string | null;
  cell_id: string | null;
  execution_count: number | null;
}

/** One training-cell run as measured. */
export interface IMeasured {
  activation_bytes: number;
  /** null unless both runs of the outcome had a measured training step */
  step_peak_bytes: number | null;
  duration_s: number;
  cell_id: string | null;
  execution_count: number | null;
}

/** Predicted vs measured for an applied suggestion. */
export interface IOutcome {
  suggestion_id: string;
  technique: string;
  title: string;
  predicted: IPredicted;
  before: IMeasured | null;
  after: IMeasured | null;
  miss_fraction: number | null;
  /** The measured saving missed the prediction by more than 20% (either figure). */
  missed: boolean;
  /** Since 1.2: how far the step-peak saving is from its prediction (null: not compared). */
  step_peak_miss_fraction?: number | null;
  /** Since 1.2: pending, met, missed, or undone (the run after it re-created what it changed). */
  verdict?: OutcomeVerdict;
  /** Since 1.2: why the verdict is what it is, in words. */
  note?: string | null;
  /** Since 1.2: the bytes a "free" suggestion's cell gave back (null for other kinds). */
  freed_bytes?: number | null;
}

export type OutcomeVerdict = 'pending' | 'met' | 'missed' | 'undone';

export interface IAdvice {
  model: string | null;
  training_cell: ICellRef | null;
  names: IAdviceNames;
  /** Ranked, best first. */
  suggestions: ISuggestion[];
  mistakes: IMistake[];
  outcomes: IOutcome[];
  notes: string[];
  /** A cell running vramscope.find_batch_size in the user's names (null: none found). */
  finder_code: string | null;
  compute_ms: number;
}

export interface IBatchTrial {
  batch_size: number;
  peak_bytes: number | null;
  fits: boolean;
  oom: boolean;
}

export interface IBatchSearch {
  search_id: string;
  state: 'running' | 'done' | 'failed';
  device: DeviceId;
  budget_bytes: number;
  tried: IBatchTrial[];
  batch_size: number | null;
  accumulation_steps: number | null;
  target_batch: number | null;
  message: string | null;
}
