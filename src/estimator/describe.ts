/**
 * The estimator's words for what came from measurement: which inputs were defaulted from the
 * watched model's setup, and how its measured activations were used for this precision.
 */
import type { IEstimate } from '../protocol';
import type { IEstimatorInputs } from './model';

/** The precision's and optimizer's display names (also the selects' choices). */
export const PRECISIONS: ReadonlyArray<[string, string]> = [
  ['bf16-mixed', 'bf16 mixed'],
  ['16-mixed', 'fp16 mixed'],
  ['32-true', 'fp32'],
  ['bf16-true', 'bf16 (pure)'],
  ['16-true', 'fp16 (pure)']
];
export const OPTIMIZERS: ReadonlyArray<[string, string]> = [
  ['adamw', 'AdamW'],
  ['adam', 'Adam'],
  ['adamw-8bit', 'AdamW 8-bit'],
  ['adam-8bit', 'Adam 8-bit'],
  ['adafactor', 'Adafactor'],
  ['sgd-momentum', 'SGD + momentum'],
  ['sgd', 'SGD']
];

const nameOf = (choices: ReadonlyArray<[string, string]>, key: string) =>
  choices.find(([k]) => k === key)?.[1] ?? key;

/** Which of precision / optimizer the estimate took from the model's measured setup. */
export function fromMeasurement(
  estimate: IEstimate | null,
  inputs: Readonly<IEstimatorInputs>
): { precision: boolean; optimizer: boolean } {
  const m = estimate?.measured;
  return {
    precision:
      !!m && inputs.precision === null && m.precision === estimate!.precision,
    optimizer:
      !!m && inputs.optimizer === null && m.optimizer === estimate!.optimizer
  };
}

/** One line saying what the model measured as, or null for a bare count. */
export function measuredLine(estimate: IEstimate): string | null {
  const m = estimate.measured;
  if (!m) {
    return null;
  }
  const parts: string[] = [];
  if (m.param_dtype) {
    parts.push(
      `parameters in ${m.param_dtype}` +
        (m.precision ? ` (${nameOf(PRECISIONS, m.precision)})` : '')
    );
  }
  if (m.optimizer_variable) {
    const kind = m.optimizer
      ? nameOf(OPTIMIZERS, m.optimizer)
      : `${m.optimizer_class}, a kind not estimated`;
    const state =
      m.optimizer_state_bytes_per_param === null
        ? 'no state yet'
        : `${m.optimizer_state_bytes_per_param.toFixed(2)} B/param of state`;
    parts.push(`optimizer ${m.optimizer_variable} (${kind}, ${state})`);
  } else {
    parts.push('no optimizer over its parameters in the namespace');
  }
  return `From the model: ${parts.join('; ')}`;
}

/**
 * The kernel's notes the view does not list because the lines above say them (the
 * activations' dtype and scaling, the measured optimizer).
 */
export function otherNotes(estimate: IEstimate): string[] {
  return estimate.notes.filter(
    note =>
      !note.startsWith('activations measured at ') &&
      !note.startsWith("the activations' dtype was not measured") &&
      !/^optimizer `[^`]*` \(/.test(note)
  );
}

/** How the activations were obtained: measured at a dtype and scaled (or why not). */
export function activationLine(estimate: IEstimate): string {
  if (estimate.activation_source !== 'measured') {
    return 'activations not measured';
  }
  const batch = `batch ${estimate.batch_size}`;
  const dtype = estimate.activation_dtype;
  const factor = estimate.activation_scale;
  if (!dtype) {
    return `activations measured (${batch}), dtype unknown: not scaled`;
  }
  if (factor === null || factor === undefined || factor === 1) {
    return `activations measured at ${dtype} (${batch}), not scaled: ${dtype} is what ${nameOf(PRECISIONS, estimate.precision)} computes in`;
  }
  return `activations measured at ${dtype} (${batch}), scaled ×${factor.toFixed(2)} for ${nameOf(PRECISIONS, estimate.precision)}`;
}
