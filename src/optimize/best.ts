/**
 * The answer line's best action, from the followed session's advice: the top suggestion not
 * yet applied ("Checkpoint model.layers: −24.5 MiB saved activations"), else the first mistake
 * with a fix. No DOM: revealing the card is the `reveal` callback's job.
 */
import { ISignal, Signal } from '@lumino/signaling';

import { formatBytes, Units } from '../format';
import type { IAdvice, ISuggestion } from '../protocol';
import type { IBestAction, IBestActionSource, IMemorySession } from '../tokens';
import { plainText } from '../words';
import type { OptimizeModel, OptimizeModels } from './model';

/** "−24.5 MiB saved activations" (what the saving is of, where the advice says). */
export function savingWords(s: ISuggestion, units: Units): string {
  const bytes = s.predicted.saving_bytes;
  if (!(bytes > 0)) {
    return '';
  }
  const of =
    s.predicted.activation_bytes_before !== null ? ' saved activations' : '';
  return `−${formatBytes(bytes, { units })}${of}`;
}

/** The advice's best action as data: a suggestion (by rank) or a mistake to fix; null: none. */
export function bestOf(
  advice: IAdvice | null,
  units: Units
): { id: string; title: string; saving: string } | null {
  if (!advice) {
    return null;
  }
  const suggestion = advice.suggestions.find(s => !s.applied);
  if (suggestion) {
    return {
      id: suggestion.id,
      title: plainText(suggestion.title),
      saving: savingWords(suggestion, units)
    };
  }
  const mistake = advice.mistakes.find(m => m.fix_code);
  if (mistake) {
    return { id: mistake.id, title: plainText(mistake.title), saving: '' };
  }
  return null;
}

export class BestAction implements IBestActionSource {
  constructor(options: BestAction.IOptions) {
    this._models = options.models;
    this._units = options.units;
    this._reveal = options.reveal;
    this._open = options.open;
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get hasAdvice(): boolean {
    return !!this._model?.advice;
  }

  get best(): IBestAction | null {
    const found = bestOf(this._model?.advice ?? null, this._units());
    if (!found) {
      return null;
    }
    return {
      title: found.title,
      saving: found.saving,
      reveal: () => this._reveal(found.id)
    };
  }

  setSession(session: IMemorySession | null): void {
    const model = session ? this._models.modelFor(session) : null;
    if (model === this._model) {
      return;
    }
    this._model?.changed.disconnect(this._onChanged, this);
    this._model = model;
    model?.changed.connect(this._onChanged, this);
    this._changed.emit();
  }

  open(): void {
    this._open();
  }

  private _onChanged(): void {
    this._changed.emit();
  }

  private _models: OptimizeModels;
  private _model: OptimizeModel | null = null;
  private _units: () => Units;
  private _reveal: (id: string) => void;
  private _open: () => void;
  private _changed = new Signal<this, void>(this);
}

export namespace BestAction {
  export interface IOptions {
    models: OptimizeModels;
    units: () => Units;
    /** Show the card of this suggestion or mistake id. */
    reveal: (id: string) => void;
    /** Open the Optimize pane. */
    open: () => void;
  }
}
