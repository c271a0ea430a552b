/**
 * The estimator's words for what came from measurement (src/estimator/describe.ts).
 */
import type { IEstimate } from '../../src/protocol';
import {
  activationLine,
  fromMeasurement,
  measuredLine,
  otherNotes
} from '../../src/estimator/describe';
import { DEFAULT_INPUTS } from '../../src/estimator/model';
import { validateEstimate } from '../../src/validate';

const BASE: IEstimate = {
  param_count: 525_568,
  precision: '32-true',
  optimizer: 'sgd-momentum',
  zero_stage: 0,
  n_gpus: 1,
  offload: [],
  batch_size: 8,
  seq_len: null,
  parameters: 2_102_272,
  gradients: 2_102_272,
  optimizer_state: 2_102_272,
  master_weights: 0,
  activations: 40_960,
  total: 6_347_776,
  cpu_offloaded: 0,
  activation_source: 'measured',
  activation_per_sample: 5120,
  model: 'net',
  notes: [],
  activation_dtype: 'float32',
  activation_scale: 1,
  measured: {
    param_dtype: 'float32',
    precision: '32-true',
    optimizer: 'sgd-momentum',
    optimizer_variable: 'opt',
    optimizer_class: 'SGD',
    optimizer_state_bytes_per_param: 4
  }
};

describe('estimator: what came from measurement', () => {
  it('marks the inputs the estimate took from the model', () => {
    expect(fromMeasurement(BASE, DEFAULT_INPUTS)).toEqual({
      precision: true,
      optimizer: true
    });
    // a choice of the user's is theirs, even when it equals the measured one
    expect(
      fromMeasurement(BASE, { ...DEFAULT_INPUTS, precision: '32-true' })
    ).toEqual({ precision: false, optimizer: true });
    expect(
      fromMeasurement({ ...BASE, measured: null }, DEFAULT_INPUTS)
    ).toEqual({ precision: false, optimizer: false });
    expect(fromMeasurement(null, DEFAULT_INPUTS)).toEqual({
      precision: false,
      optimizer: false
    });
  });

  it('says what the model measured as', () => {
    expect(measuredLine(BASE)).toBe(
      'From the model: parameters in float32 (fp32); optimizer opt (SGD + momentum, 4.00 B/param of state)'
    );
    const m = BASE.measured!;
    expect(
      measuredLine({
        ...BASE,
        measured: {
          ...m,
          optimizer: null,
          optimizer_class: 'Lion',
          optimizer_state_bytes_per_param: null
        }
      })
    ).toBe(
      'From the model: parameters in float32 (fp32); optimizer opt (Lion, a kind not estimated, no state yet)'
    );
    expect(
      measuredLine({ ...BASE, measured: { ...m, optimizer_variable: null } })
    ).toContain('no optimizer over its parameters');
    expect(measuredLine({ ...BASE, measured: null })).toBeNull();
  });

  it('says at which dtype activations were measured and how they were scaled', () => {
    expect(activationLine(BASE)).toBe(
      'activations measured at float32 (batch 8), not scaled: float32 is what fp32 computes in'
    );
    expect(
      activationLine({
        ...BASE,
        precision: 'bf16-mixed',
        activation_scale: 0.5
      })
    ).toBe(
      'activations measured at float32 (batch 8), scaled ×0.50 for bf16 mixed'
    );
    expect(activationLine({ ...BASE, activation_dtype: null })).toContain(
      'dtype unknown: not scaled'
    );
    expect(
      activationLine({ ...BASE, activation_source: 'none', activations: 0 })
    ).toBe('activations not measured');
  });

  it('lists only the notes the lines above do not say', () => {
    const notes = [
      "activations scaled from the 40,960 bytes 'net' saved for backward at batch size 8",
      'activations measured at float32, scaled x0.50 to bfloat16 for bf16-mixed',
      "the activations' dtype was not measured: used as measured",
      'optimizer `opt` (SGD) keeps 4.00 bytes of state per parameter (measured)',
      'stage 3 also gathers each layer'
    ];
    expect(otherNotes({ ...BASE, notes })).toEqual([notes[0], notes[4]]);
  });

  it('validates the since-1.1 fields (optional; typed when present)', () => {
    expect(validateEstimate(BASE)).toBe(BASE);
    const { activation_dtype, activation_scale, measured, ...older } = BASE;
    expect([activation_dtype, activation_scale, !!measured]).toEqual([
      'float32',
      1,
      true
    ]);
    expect(validateEstimate(older)).toBe(older);
    expect(validateEstimate({ ...BASE, activation_scale: -1 })).toMatch(
      /estimate.activation_scale/
    );
    expect(
      validateEstimate({
        ...BASE,
        measured: { ...BASE.measured!, optimizer_state_bytes_per_param: 'x' }
      })
    ).toMatch(/estimate.measured.optimizer_state_bytes_per_param/);
    const bare = { ...BASE, measured: null };
    expect(validateEstimate(bare)).toBe(bare);
  });
});
