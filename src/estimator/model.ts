/**
 * The estimator calculator's state: its inputs, the session it asks, and the last answer of
 * the kernel's `estimate` request (the kernel computes; this model only asks and keeps).
 */
import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import type { IEstimate, IEstimateParams, IModelInfo } from '../protocol';
import type { IMemorySession } from '../tokens';
import { validateEstimate } from '../validate';
import { GIB, parseParamCount } from './math';

/** What the calculator is asked. */
export interface IEstimatorInputs {
  /** A namespace model's name; '' for the typed size; null: the watched model (or typed). */
  source: string | null;
  sizeText: string;
  /** null: what the model's setup measures as (`IEstimate.measured`), else bf16-mixed. */
  precision: string | null;
  /** null: the optimizer found over the model's parameters, else AdamW. */
  optimizer: string | null;
  /** Per GPU; null: the measured batch size. */
  batchSize: number | null;
  nGpus: number;
  zeroStage: number;
  /** '' (none), 'optimizer' or 'all'. */
  offload: string;
  /** GPU memory to compare against, GiB. */
  gpuGiB: number;
}

export const DEFAULT_INPUTS: IEstimatorInputs = {
  source: null,
  sizeText: '7B',
  precision: null,
  optimizer: null,
  batchSize: null,
  nGpus: 1,
  zeroStage: 0,
  offload: '',
  gpuGiB: 80
};

export class EstimatorModel implements IDisposable {
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get session(): IMemorySession | null {
    return this._session;
  }

  get inputs(): Readonly<IEstimatorInputs> {
    return this._inputs;
  }

  /** The namespace's models (from the session's insight), largest first. */
  get models(): ReadonlyArray<IModelInfo> {
    return this._session?.insight?.models ?? [];
  }

  /** The model the estimate is for: a name, or '' for the typed size. */
  get effectiveSource(): string {
    const source = this._inputs.source;
    if (source !== null) {
      return source;
    }
    return this._session?.insight?.model ?? this.models[0]?.name ?? '';
  }

  get estimate(): IEstimate | null {
    return this._estimate;
  }

  /** Why there is no estimate (bad input, no kernel, the kernel's error), or null. */
  get error(): string | null {
    return this._error;
  }

  get gpuBytes(): number {
    return Math.round(this._inputs.gpuGiB * GIB);
  }

  /** While false (the section is hidden) nothing is asked of the kernel. */
  set active(active: boolean) {
    this._active = active;
    if (active && this._stale) {
      void this.compute();
    }
  }

  setSession(session: IMemorySession | null): void {
    if (session === this._session) {
      return;
    }
    if (this._session) {
      this._session.insightChanged.disconnect(this._onInsight, this);
      this._session.statusChanged.disconnect(this._onStatus, this);
    }
    this._session = session;
    if (session) {
      session.insightChanged.connect(this._onInsight, this);
      session.statusChanged.connect(this._onStatus, this);
    }
    this._estimate = null;
    this._schedule();
  }

  /**
   * Whether the estimate answers a question of the user's: they changed an input, or it is
   * for a kernel model. False for the example size shown before either (the empty state).
   */
  get asked(): boolean {
    return this._touched || this.effectiveSource !== '';
  }

  /** The empty state: no kernel model and nothing typed or chosen yet. */
  get isEmpty(): boolean {
    return !this.asked && this.models.length === 0;
  }

  /** The user's change of inputs (`asked` becomes true). */
  setInputs(patch: Partial<IEstimatorInputs>): void {
    this._touched = true;
    this._inputs = { ...this._inputs, ...patch };
    this._schedule();
  }

  /** The request's params, or a message saying what to fix. */
  params(): IEstimateParams | string {
    const inputs = this._inputs;
    const options = {
      // left out: the kernel uses what the model measures as, else its default
      ...(inputs.precision !== null ? { precision: inputs.precision } : {}),
      ...(inputs.optimizer !== null ? { optimizer: inputs.optimizer } : {}),
      batch_size: inputs.batchSize,
      n_gpus: inputs.nGpus,
      zero_stage: inputs.zeroStage,
      offload: inputs.offload || null
    };
    const source = this.effectiveSource;
    if (source) {
      return { model: source, ...options };
    }
    const count = parseParamCount(inputs.sizeText);
    if (count === null) {
      return 'Type a model size such as 7B, 125M or 350k.';
    }
    return { params: count, ...options };
  }

  /** Ask the kernel now (answers to older requests are dropped). */
  async compute(): Promise<void> {
    this._stale = false;
    const seq = ++this._seq;
    const params = this.params();
    const session = this._session;
    let estimate: IEstimate | null = null;
    let error: string | null = null;
    if (typeof params === 'string') {
      error = params;
    } else if (!session || session.status !== 'connected') {
      error = 'Connect a notebook kernel with vramscope to estimate.';
    } else {
      try {
        const result = await session.request('estimate', params);
        const checked = validateEstimate(result?.estimate);
        if (typeof checked === 'string') {
          error = `Invalid answer from the kernel: ${checked}`;
        } else {
          estimate = checked;
        }
      } catch (reason) {
        error = (reason as Error).message ?? String(reason);
      }
    }
    if (seq !== this._seq || this._disposed) {
      return;
    }
    this._estimate = estimate;
    this._error = error;
    this._changed.emit();
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this.setSession(null);
    this._disposed = true;
    Signal.clearData(this);
  }

  private _schedule(): void {
    this._changed.emit();
    if (this._active) {
      void this.compute();
    } else {
      this._stale = true;
    }
  }

  private _onInsight(): void {
    // a new model, or a new measurement of the one estimated
    if (this.effectiveSource) {
      this._schedule();
    } else {
      this._changed.emit();
    }
  }

  private _onStatus(): void {
    this._schedule();
  }

  private _session: IMemorySession | null = null;
  private _inputs: IEstimatorInputs = { ...DEFAULT_INPUTS };
  private _estimate: IEstimate | null = null;
  private _error: string | null = null;
  private _active = false;
  private _touched = false;
  private _stale = true;
  private _seq = 0;
  private _disposed = false;
  private _changed = new Signal<this, void>(this);
}
