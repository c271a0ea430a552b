/**
 * Optimize (since 1.1): the `advice` and `batch_search` payloads.
 */
import { Check, Checks } from './checks';

const { str, bool, num, nonNeg, int, bytes, literal, nullable, array, object } =
  Checks;

const fraction: Check = (v, p) =>
  num(v, p) ??
  ((v as number) >= 0 && (v as number) <= 1
    ? null
    : `${p}: expected a fraction in 0..1, got ${v}`);

const cellRef = object({
  cell_id: nullable(str),
  execution_count: nullable(int)
});

const predicted = object({
  activation_bytes_before: nullable(bytes),
  activation_bytes_after: nullable(bytes),
  saving_bytes: bytes,
  step_peak_saving_bytes: nullable(bytes),
  saving_fraction: nullable(fraction)
});

const suggestion = object(
  {
    id: str,
    technique: str,
    title: str,
    why: array(str),
    predicted,
    cost: object({ text: str, factor: nullable(nonNeg) }),
    kind: literal('enable', 'rewrite', 'template', 'free'),
    code: str,
    undo_code: nullable(str),
    target_cell: nullable(cellRef),
    applied: bool
  },
  ['applied'] // since 1.2
);

const mistake = object({
  id: str,
  title: str,
  why: str,
  fix_code: nullable(str),
  cell_id: nullable(str),
  execution_count: nullable(int)
});

const measured = object({
  activation_bytes: bytes,
  step_peak_bytes: nullable(bytes),
  duration_s: nonNeg,
  cell_id: nullable(str),
  execution_count: nullable(int)
});

const outcome = object(
  {
    suggestion_id: str,
    technique: str,
    title: str,
    predicted,
    before: nullable(measured),
    after: nullable(measured),
    miss_fraction: nullable(nonNeg),
    missed: bool,
    step_peak_miss_fraction: nullable(nonNeg),
    verdict: literal('pending', 'met', 'missed', 'undone'),
    note: nullable(str),
    freed_bytes: nullable(bytes)
  },
  ['step_peak_miss_fraction', 'verdict', 'note', 'freed_bytes'] // since 1.2
);

const names = ['model', 'optimizer', 'loss_fn', 'data', 'batch'];

export const advice = object({
  model: nullable(str),
  training_cell: nullable(cellRef),
  names: object(Object.fromEntries(names.map(n => [n, nullable(str)]))),
  suggestions: array(suggestion),
  mistakes: array(mistake),
  outcomes: array(outcome),
  notes: array(str),
  finder_code: nullable(str),
  compute_ms: nonNeg
});

export const batchSearch = object({
  search_id: str,
  state: literal('running', 'done', 'failed'),
  device: str,
  budget_bytes: bytes,
  tried: array(
    object({
      batch_size: bytes,
      peak_bytes: nullable(bytes),
      fits: bool,
      oom: bool
    })
  ),
  batch_size: nullable(bytes),
  accumulation_steps: nullable(bytes),
  target_batch: nullable(bytes),
  message: nullable(str)
});
