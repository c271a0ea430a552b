/**
 * The timeline's toolbar: device picker, followed window, "Follow live", the sample-rate
 * picker and the sample count. It renders the state it is given and reports the user's
 * choices through callbacks; `emptyText` is what the timeline says when it has no plot.
 */
import type { IMemorySession } from '../tokens';

/** Window choices for "follow live" (seconds; Infinity = the whole history). */
export const WINDOW_CHOICES: ReadonlyArray<{ label: string; seconds: number }> =
  [
    { label: '1 min', seconds: 60 },
    { label: '5 min', seconds: 300 },
    { label: '30 min', seconds: 1800 },
    { label: '2 h', seconds: 7200 },
    { label: 'all', seconds: Infinity }
  ];

/** Sample-rate choices of the toolbar's rate picker (Hz; 0 = off). */
export const SAMPLE_RATE_CHOICES: ReadonlyArray<number> = [0, 1, 2, 5, 10, 20];

export class TimelineControls {
  constructor(options: TimelineControls.IOptions) {
    this._options = options;
    const bar = (this.node = document.createElement('div'));
    bar.className = 'vramscope-Timeline-toolbar';

    this._deviceSelect = select('vramscope-Timeline-device', 'Device');
    this._deviceSelect.title = 'Device';
    this._deviceSelect.addEventListener('change', this);

    this._windowSelect = select('vramscope-Timeline-window', 'Time window');
    this._windowSelect.title = 'Time window shown while following live';
    for (const w of WINDOW_CHOICES) {
      const opt = document.createElement('option');
      opt.value = String(w.seconds);
      opt.textContent = w.label;
      this._windowSelect.appendChild(opt);
    }
    this._windowSelect.addEventListener('change', this);

    this._followButton = document.createElement('button');
    this._followButton.type = 'button';
    this._followButton.className = 'vramscope-Timeline-follow';
    this._followButton.textContent = 'Follow live';
    this._followButton.title =
      'Keep the time axis on the latest samples (zooming or panning turns this off)';
    this._followButton.addEventListener('click', this);

    this._status = document.createElement('span');
    this._status.className = 'vramscope-Timeline-status';

    this._rateSelect = select('vramscope-Timeline-rate', 'Sample rate');
    this._rateSelect.title =
      'Sample rate of the live timeline (the "sampleHz" setting)';
    this._rateSelect.hidden = !options.setSampleHz;
    this._rateSelect.addEventListener('change', this);

    bar.append(
      this._deviceSelect,
      this._windowSelect,
      this._followButton,
      this._rateSelect,
      this._status
    );
  }

  readonly node: HTMLDivElement;

  /** The rate shown when no kernel has reported its settings (e.g. the front-end setting). */
  set sampleHzFallback(hz: number) {
    this._sampleHzFallback = hz;
    this._syncRate();
  }

  /** Show this state. */
  sync(state: TimelineControls.IState): void {
    this._state = state;
    const ids = state.devices.join('\n');
    if (ids !== this._deviceIds) {
      this._deviceIds = ids;
      this._deviceSelect.textContent = '';
      for (const id of state.devices) {
        const opt = document.createElement('option');
        opt.value = id;
        opt.textContent = id;
        this._deviceSelect.appendChild(opt);
      }
    }
    this._deviceSelect.hidden = state.devices.length < 2;
    if (state.device) {
      this._deviceSelect.value = state.device;
    }
    this._windowSelect.value = String(state.windowSeconds);
    this._syncRate();
    this._followButton.setAttribute('aria-pressed', String(state.follow));
    this._followButton.classList.toggle('vramscope-mod-active', state.follow);
    const n = state.sampleCount;
    this._status.textContent = n
      ? `${n.toLocaleString('en-US')} sample${n === 1 ? '' : 's'}`
      : '';
  }

  handleEvent(event: Event): void {
    const target = event.currentTarget;
    if (event.type === 'click' && target === this._followButton) {
      this._options.onFollowToggled();
    } else if (target === this._deviceSelect) {
      this._options.onDevice(this._deviceSelect.value || null);
    } else if (target === this._rateSelect) {
      this._onRate(Number(this._rateSelect.value));
    } else if (target === this._windowSelect) {
      this._options.onWindow(Number(this._windowSelect.value));
    }
  }

  private _onRate(hz: number): void {
    const setSampleHz = this._options.setSampleHz;
    if (!setSampleHz || !Number.isFinite(hz)) {
      return;
    }
    this._pendingHz = hz;
    void Promise.resolve(setSampleHz(hz))
      .catch(reason =>
        console.error('vramscope: could not set the sample rate', reason)
      )
      .finally(() => {
        this._pendingHz = null;
        this._syncRate();
      });
  }

  /** The rate picker shows the kernel's applied rate (or the one being set). */
  private _syncRate(): void {
    if (!this._options.setSampleHz) {
      return;
    }
    const hz =
      this._pendingHz ?? this._state.sampleHz ?? this._sampleHzFallback;
    const choices = SAMPLE_RATE_CHOICES.includes(hz)
      ? SAMPLE_RATE_CHOICES
      : [...SAMPLE_RATE_CHOICES, hz].sort((a, b) => a - b);
    const key = choices.join(',');
    if (key !== this._rateChoices) {
      this._rateChoices = key;
      this._rateSelect.textContent = '';
      for (const c of choices) {
        const opt = document.createElement('option');
        opt.value = String(c);
        opt.textContent = c === 0 ? 'off' : `${c} Hz`;
        this._rateSelect.appendChild(opt);
      }
    }
    this._rateSelect.value = String(hz);
    this._rateSelect.disabled = !this._state.hasSession;
  }

  private _options: TimelineControls.IOptions;
  private _state: TimelineControls.IState = {
    devices: [],
    device: null,
    windowSeconds: 300,
    follow: true,
    sampleCount: 0,
    sampleHz: undefined,
    hasSession: false
  };
  private _deviceIds = '';
  private _rateChoices = '';
  private _pendingHz: number | null = null;
  private _sampleHzFallback = 10;
  private _deviceSelect: HTMLSelectElement;
  private _windowSelect: HTMLSelectElement;
  private _followButton: HTMLButtonElement;
  private _rateSelect: HTMLSelectElement;
  private _status: HTMLSpanElement;
}

export namespace TimelineControls {
  export interface IOptions {
    onDevice: (id: string | null) => void;
    onWindow: (seconds: number) => void;
    onFollowToggled: () => void;
    /** Change the sample rate (Hz, 0 = off); without it the rate picker is hidden. */
    setSampleHz?: ((hz: number) => void | Promise<void>) | null;
  }

  /** What the toolbar shows. */
  export interface IState {
    /** The device ids that have samples. */
    devices: ReadonlyArray<string>;
    /** The device shown. */
    device: string | null;
    windowSeconds: number;
    follow: boolean;
    sampleCount: number;
    /** The kernel's applied sample rate (undefined: not known). */
    sampleHz: number | undefined;
    hasSession: boolean;
  }
}

function select(className: string, label: string): HTMLSelectElement {
  const node = document.createElement('select');
  node.className = className;
  node.setAttribute('aria-label', label);
  return node;
}

/** What the timeline says instead of a plot ('' when it has one to show). */
export function emptyText(
  session: IMemorySession | null,
  hasDevice: boolean
): string {
  if (!session) {
    return 'No notebook selected.';
  }
  if (hasDevice) {
    return '';
  }
  return session.settings?.sample_hz === 0
    ? 'Sampling is off (sample_hz = 0): no live timeline.'
    : 'No samples yet: they appear while the kernel runs.';
}
