/**
 * The panel's Estimator section: model size (a namespace model or typed in), precision,
 * optimizer, batch, GPUs, ZeRO stage and offload in; a bar per part and "fits / does not fit"
 * against a chosen GPU size out. Renders an `EstimatorModel`; the kernel computes.
 */
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { formatBytes, Units } from '../format';
import type { IMemorySession, IMemorySessionView } from '../tokens';
import { h } from '../panel/base';
import {
  activationLine,
  fromMeasurement,
  measuredLine,
  OPTIMIZERS,
  otherNotes,
  PRECISIONS
} from './describe';
import {
  estimateBars,
  formatParamCount,
  GPU_PRESETS_GIB,
  parseGiB,
  verdictState
} from './math';
import { EstimatorModel, IEstimatorInputs } from './model';

/** The model picker's entry for a typed-in size. */
const TYPED = '';
const CUSTOM = 'custom';

const STAGES: ReadonlyArray<[string, string]> = [
  ['0', 'none (DDP)'],
  ['1', 'ZeRO-1'],
  ['2', 'ZeRO-2 / FSDP grad-op'],
  ['3', 'ZeRO-3 / FSDP full']
];
const OFFLOADS: ReadonlyArray<[string, string]> = [
  ['', 'none'],
  ['optimizer', 'optimizer → CPU'],
  ['all', 'optimizer + params → CPU']
];

export class EstimatorView extends Widget implements IMemorySessionView {
  constructor(options: EstimatorView.IOptions = {}) {
    super();
    this.addClass('vramscope-Estimator');
    this.model = options.model ?? new EstimatorModel();
    this._units = options.units ?? (() => 'binary');
    const form = h('div', 'vramscope-Estimator-form');
    this._source = this._select('source', 'Model', []);
    this._size = this._input('size', 'Size', 'text', '7B');
    this._size.placeholder = 'e.g. 7B, 125M';
    this._precision = this._select('precision', 'Precision', PRECISIONS);
    this._optimizer = this._select('optimizer', 'Optimizer', OPTIMIZERS);
    this._batch = this._input('batch', 'Batch / GPU', 'number', '');
    this._batch.placeholder = 'measured';
    this._batch.min = '1';
    this._gpus = this._input('gpus', 'GPUs', 'number', '1');
    this._gpus.min = '1';
    this._stage = this._select('stage', 'Sharding', STAGES);
    this._offload = this._select('offload', 'Offload', OFFLOADS);
    const gpuChoices: [string, string][] = GPU_PRESETS_GIB.map(g => [
      String(g),
      `${g} GiB`
    ]);
    gpuChoices.push([CUSTOM, 'custom…']);
    this._gpu = this._select('gpu', 'GPU memory', gpuChoices);
    this._customGpu = this._input('custom-gpu', 'Custom GiB', 'number', '48');
    this._customGpu.min = '1';
    for (const [label, control] of this._controls) {
      form.append(label, control);
    }
    this._result = h('div', 'vramscope-Estimator-result');
    this.node.append(form, this._result);
    this.model.changed.connect(this._render, this);
    this._render();
  }

  readonly model: EstimatorModel;

  setSession(session: IMemorySession | null): void {
    this.model.setSession(session);
  }

  handleEvent(event: Event): void {
    if (event.type === 'change') {
      this._onChange(event.target as HTMLElement);
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.model.changed.disconnect(this._render, this);
    this.model.dispose();
    super.dispose();
  }

  protected onAfterShow(msg: Message): void {
    this.model.active = true;
  }

  protected onAfterHide(msg: Message): void {
    this.model.active = false;
  }

  protected onBeforeDetach(msg: Message): void {
    this.model.active = false;
  }

  private _onChange(target: HTMLElement): void {
    const patch: Partial<IEstimatorInputs> = {};
    const whole = (input: HTMLInputElement): number | null => {
      const value = Number(input.value);
      return input.value.trim() && Number.isInteger(value) && value >= 1
        ? value
        : null;
    };
    if (target === this._source) {
      patch.source = this._source.value;
    } else if (target === this._size) {
      patch.sizeText = this._size.value;
      patch.source = TYPED;
    } else if (target === this._precision) {
      patch.precision = this._precision.value;
    } else if (target === this._optimizer) {
      patch.optimizer = this._optimizer.value;
    } else if (target === this._batch) {
      patch.batchSize = whole(this._batch);
    } else if (target === this._gpus) {
      patch.nGpus = whole(this._gpus) ?? 1;
    } else if (target === this._stage) {
      patch.zeroStage = Number(this._stage.value);
    } else if (target === this._offload) {
      patch.offload = this._offload.value;
    } else if (target === this._gpu || target === this._customGpu) {
      const preset = this._gpu.value !== CUSTOM;
      const gib = preset
        ? Number(this._gpu.value)
        : parseGiB(this._customGpu.value);
      if (gib !== null) {
        patch.gpuGiB = gib;
      }
      this._customGpu.disabled = preset;
    }
    this.model.setInputs(patch);
  }

  private _render(): void {
    const model = this.model;
    const inputs = model.inputs;
    const source = model.effectiveSource;
    this._fillSources(source);
    this._size.disabled = source !== TYPED;
    const estimate = model.estimate;
    if (source !== TYPED) {
      this._size.value =
        estimate?.model === source
          ? formatParamCount(estimate.param_count)
          : '';
    } else if (document.activeElement !== this._size) {
      this._size.value = inputs.sizeText;
    }
    const measured = fromMeasurement(estimate, inputs);
    this._precision.value =
      inputs.precision ?? estimate?.precision ?? 'bf16-mixed';
    this._optimizer.value = inputs.optimizer ?? estimate?.optimizer ?? 'adamw';
    this._mark(this._precision, measured.precision);
    this._mark(this._optimizer, measured.optimizer);
    this._stage.value = String(inputs.zeroStage);
    this._offload.value = inputs.offload;
    const preset = GPU_PRESETS_GIB.includes(inputs.gpuGiB);
    if (document.activeElement !== this._gpu) {
      this._gpu.value = preset ? String(inputs.gpuGiB) : CUSTOM;
    }
    this._customGpu.disabled = this._gpu.value !== CUSTOM;
    this._renderResult();
  }

  private _fillSources(selected: string): void {
    const names = this.model.models.map(m => m.name);
    if (selected && !names.includes(selected)) {
      names.push(selected);
    }
    const key = names.join('\n');
    if (key !== this._sourcesKey) {
      this._sourcesKey = key;
      const options = names.map(name => {
        const info = this.model.models.find(m => m.name === name);
        const text = info ? `${name} (${info.type})` : name;
        return h('option', '', text, { value: name });
      });
      options.push(h('option', '', 'typed size', { value: TYPED }));
      this._source.replaceChildren(...options);
    }
    this._source.value = selected;
  }

  private _renderResult(): void {
    const model = this.model;
    const estimate = model.estimate;
    const units = this._units();
    const fmt = (bytes: number) => formatBytes(bytes, { units });
    const nodes: HTMLElement[] = [];
    if (model.isEmpty) {
      nodes.push(
        h(
          'div',
          'vramscope-Estimator-empty',
          'No model in the kernel yet. Type a parameter count (7B, 125M, 350k) to see what ' +
            'training it needs per GPU, or run a forward and backward of your model with ' +
            'vramscope loaded to estimate from it, with its activations measured. ' +
            'Below: the example size.'
        )
      );
    }
    if (model.error) {
      nodes.push(h('div', 'vramscope-Estimator-error', model.error));
    }
    if (estimate && !model.error) {
      const out = estimateBars(estimate, model.gpuBytes);
      const state = verdictState(out.fits, model.asked);
      const verdict = h(
        'div',
        `vramscope-Estimator-verdict vramscope-mod-${state}`,
        out.fits
          ? `Fits in ${fmt(out.gpuBytes)}: ${fmt(out.headroom)} free`
          : `${state === 'info' ? 'Needs more than' : 'Does not fit in'} ${fmt(out.gpuBytes)}: ${fmt(-out.headroom)} over`
      );
      verdict.dataset.fits = String(out.fits);
      verdict.dataset.state = state;
      nodes.push(verdict);
      const bars = h('div', 'vramscope-Estimator-bars');
      for (const bar of out.bars) {
        const row = h('div', 'vramscope-Estimator-row');
        row.dataset.part = bar.key;
        const track = h('div', 'vramscope-Estimator-track');
        const fill = h('div', 'vramscope-Estimator-fill');
        fill.style.width = `${bar.percent.toFixed(2)}%`;
        track.appendChild(fill);
        let text = fmt(bar.bytes);
        if (bar.key === 'total') {
          const marker = h('div', 'vramscope-Estimator-gpu');
          marker.style.left = `${out.gpuPercent.toFixed(2)}%`;
          marker.title = `GPU: ${fmt(out.gpuBytes)}`;
          track.appendChild(marker);
          track.title = `Total against the GPU's ${fmt(out.gpuBytes)} (marker)`;
        } else {
          track.title = `${bar.share.toFixed(1)}% of the total`;
        }
        const value = h('span', 'vramscope-Estimator-value', text);
        if (bar.key !== 'total') {
          text = `${bar.share < 1 && bar.bytes > 0 ? '<1' : bar.share.toFixed(0)}%`;
          value.appendChild(h('span', 'vramscope-Estimator-share', text));
        }
        row.append(
          h('span', 'vramscope-Estimator-label', bar.label),
          track,
          value
        );
        bars.appendChild(row);
      }
      nodes.push(bars);
      nodes.push(
        h(
          'div',
          'vramscope-Estimator-meta',
          `${formatParamCount(estimate.param_count)} parameters, per GPU` +
            (estimate.cpu_offloaded
              ? `; ${fmt(estimate.cpu_offloaded)} on the CPU`
              : '') +
            `; ${activationLine(estimate)}`
        )
      );
      const line = measuredLine(estimate);
      if (line) {
        nodes.push(h('div', 'vramscope-Estimator-measured', line));
      }
      const rest = otherNotes(estimate);
      if (rest.length) {
        const notes = h('ul', 'vramscope-Estimator-notes');
        for (const note of rest) {
          notes.appendChild(h('li', '', note));
        }
        nodes.push(notes);
      }
    }
    this._result.replaceChildren(...nodes);
  }

  /** Marks a control whose value came from the model's measured setup. */
  private _mark(control: HTMLElement, measured: boolean): void {
    control.classList.toggle('vramscope-mod-measured', measured);
    const label = control.previousElementSibling as HTMLElement | null;
    label?.classList.toggle('vramscope-mod-measured', measured);
    control.title = measured ? 'From the model: what was measured' : '';
  }

  private _select(
    name: string,
    label: string,
    choices: ReadonlyArray<[string, string]>
  ): HTMLSelectElement {
    const select = h('select', 'vramscope-Estimator-input', undefined, {
      'data-field': name,
      'aria-label': label
    });
    for (const [value, text] of choices) {
      select.appendChild(h('option', '', text, { value }));
    }
    this._add(label, select);
    return select;
  }

  private _input(
    name: string,
    label: string,
    type: string,
    value: string
  ): HTMLInputElement {
    const input = h('input', 'vramscope-Estimator-input', undefined, {
      type,
      'data-field': name,
      'aria-label': label
    });
    input.value = value;
    this._add(label, input);
    return input;
  }

  private _add(label: string, control: HTMLElement): void {
    control.addEventListener('change', this);
    this._controls.push([
      h('label', 'vramscope-Estimator-name', label),
      control
    ]);
  }

  private _units: () => Units;
  private _controls: [HTMLElement, HTMLElement][] = [];
  private _sourcesKey: string | null = null;
  private _source: HTMLSelectElement;
  private _size: HTMLInputElement;
  private _precision: HTMLSelectElement;
  private _optimizer: HTMLSelectElement;
  private _batch: HTMLInputElement;
  private _gpus: HTMLInputElement;
  private _stage: HTMLSelectElement;
  private _offload: HTMLSelectElement;
  private _gpu: HTMLSelectElement;
  private _customGpu: HTMLInputElement;
  private _result: HTMLElement;
}

export namespace EstimatorView {
  export interface IOptions {
    model?: EstimatorModel;
    /** The units bytes are shown in (the tracker's setting). */
    units?: () => Units;
  }
}
