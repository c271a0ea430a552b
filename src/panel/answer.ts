import { ISignal } from '@lumino/signaling';

import { formatBytes } from '../format';
import { IBestActionSource, IMemorySession, IMemoryTracker } from '../tokens';
import { h, SessionView } from './base';
import { busiest, DevicePeaks } from './glance';

/**
 * The panel's answer line, first thing in it: memory now and the session's peak on the
 * busiest device (`.vramscope-Answer-memory[data-device]`), then the best action with its
 * predicted saving (`.vramscope-Answer-action`, a link to its card), or a link that opens the
 * Optimize pane when no advice was asked for yet.
 */
export class AnswerView extends SessionView {
  constructor(tracker: IMemoryTracker) {
    super(tracker);
    this.addClass('vramscope-Answer');
    this._memory = h('div', 'vramscope-Answer-memory');
    this._action = h('button', 'vramscope-Answer-action', '', {
      type: 'button'
    });
    this._action.addEventListener('click', () => this._activate());
    this.node.append(this._memory, this._action);
    this.update();
  }

  /** Where the best action comes from (the Optimize plugin); null: none. */
  setSource(source: IBestActionSource | null): void {
    this._source?.changed.disconnect(this._onSource, this);
    this._source = source;
    source?.changed.connect(this._onSource, this);
    source?.setSession(this.session);
    this.update();
  }

  setSession(session: IMemorySession | null): void {
    this._source?.setSession(session);
    super.setSession(session);
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.setSource(null);
    super.dispose();
  }

  protected signalsOf(
    session: IMemorySession
  ): ISignal<IMemorySession, unknown>[] {
    return [
      session.samplesAdded,
      session.devicesChanged,
      session.cellRecorded,
      session.changed,
      session.statusChanged
    ];
  }

  protected render(session: IMemorySession | null): void {
    const units = this.tracker.settings.units;
    const device = session ? busiest(this._peaks.read(session)) : null;
    const memory = this._memory;
    if (device) {
      const fmt = (b: number) => formatBytes(b, { units });
      const title =
        `${device.id}: ${fmt(device.now)} in use now; the most this session: ` +
        `${fmt(device.peak)}` +
        (device.total ? ` of ${fmt(device.total)}` : '');
      // what is shown, not the raw bytes: an idle kernel's every sample differs by a few
      // KiB, and rebuilding the same text 4 times a second costs a layout each time
      const signature = `${device.id}|${title}`;
      if (memory.dataset.signature !== signature) {
        memory.dataset.signature = signature;
        memory.dataset.device = device.id;
        memory.textContent = '';
        memory.append(
          h('span', 'vramscope-Answer-device', device.id),
          ' ',
          h('strong', 'vramscope-Answer-now', fmt(device.now)),
          ' now · peak ',
          h('strong', 'vramscope-Answer-peak', fmt(device.peak))
        );
        memory.title = title;
      }
    } else if (memory.dataset.signature !== '') {
      memory.dataset.signature = '';
      delete memory.dataset.device;
      memory.textContent = session
        ? 'No memory reported yet.'
        : 'Open a notebook to see its memory.';
      memory.title = '';
    }

    const source = this._source;
    const best = source?.best ?? null;
    const action = this._action;
    action.hidden = !session || !source;
    action.classList.toggle('vramscope-mod-none', !best);
    const [kind, text, title] = best
      ? [
          'action',
          best.saving ? `${best.title}: ${best.saving}` : best.title,
          'Show this suggestion in Optimize'
        ]
      : source?.hasAdvice
        ? ['nothing', 'No change to suggest now', 'Show Optimize']
        : [
            'open',
            'What would save memory? Open Optimize',
            'Open the Optimize pane: suggestions with predicted savings'
          ];
    // set only what changed: this runs with every batch of samples
    if (action.dataset.kind !== kind) {
      action.dataset.kind = kind;
    }
    if (action.textContent !== text) {
      action.textContent = text;
    }
    if (action.title !== title) {
      action.title = title;
    }
  }

  private _activate(): void {
    const best = this._source?.best;
    if (best) {
      best.reveal();
    } else {
      this._source?.open();
    }
  }

  private _onSource(): void {
    this.update();
  }

  private _memory: HTMLElement;
  private _action: HTMLButtonElement;
  private _source: IBestActionSource | null = null;
  private _peaks = new DevicePeaks();
}
