import { ISignal } from '@lumino/signaling';

import { INSTALL_LINE } from '../model/bridge';
import { selfMemoryOf } from '../selfmem';
import { ConnectionStatus, IMemorySession, IMemoryTracker } from '../tokens';
import { h, SessionView } from './base';

/**
 * The panel header: `.vramscope-Status[data-status=<ConnectionStatus>]` with the status
 * message, the install line (with a copy button) when the bridge is missing, a reconnect
 * button when it makes sense, the kernel versions, and warnings.
 */
export class StatusView extends SessionView {
  constructor(tracker: IMemoryTracker) {
    super(tracker);
    this.addClass('vramscope-Status');
    this.update();
  }

  protected signalsOf(
    session: IMemorySession
  ): ISignal<IMemorySession, unknown>[] {
    return [
      session.statusChanged,
      session.changed,
      selfMemoryOf(session).changed
    ];
  }

  protected render(session: IMemorySession | null): void {
    const node = this.node;
    node.textContent = '';
    const status: ConnectionStatus = session?.status ?? 'idle';
    node.dataset.status = status;
    const head = h('div', 'vramscope-Status-head');
    head.appendChild(h('span', 'vramscope-Status-dot'));
    head.appendChild(
      h('span', 'vramscope-Status-label', Private.LABELS[status])
    );
    if (session) {
      head.appendChild(
        h('span', 'vramscope-Status-path', session.path, {
          title: session.path
        })
      );
    }
    node.appendChild(head);

    const message = session
      ? session.statusMessage
      : 'Open a notebook to see its memory per cell.';
    if (message) {
      node.appendChild(h('p', 'vramscope-Status-message', message));
    }
    if (status === 'no-bridge') {
      node.appendChild(Private.installLine());
    }
    if (session?.reconnect && Private.RETRY.includes(status)) {
      const retry = h(
        'button',
        'vramscope-Status-retry jp-mod-styled',
        'Reconnect',
        {
          type: 'button'
        }
      );
      retry.addEventListener('click', () => session.reconnect?.());
      node.appendChild(retry);
    }
    if (session?.kernel && status === 'connected') {
      const k = session.kernel;
      const torch = k.torch_version ? `torch ${k.torch_version}` : 'no torch';
      const accel = k.cuda_available
        ? ' · CUDA'
        : k.mps_available
          ? ' · MPS'
          : '';
      node.appendChild(
        h(
          'p',
          'vramscope-Status-kernel',
          `Python ${k.python} · ${torch}${accel} · pid ${k.pid}`
        )
      );
      const self = selfMemoryOf(session).text;
      if (self) {
        node.appendChild(
          h('p', 'vramscope-Status-kernel vramscope-Status-self', self, {
            title:
              "An estimate of the kernel memory held by vramscope's own " +
              'structures (samples, cell records, insight caches)'
          })
        );
      }
    }
    const warnings = (session?.warnings ?? []).filter(
      w => !message.includes(w)
    );
    if (warnings.length) {
      const list = h('ul', 'vramscope-Status-warnings');
      for (const w of warnings.slice(-5)) {
        list.appendChild(h('li', 'vramscope-Status-warning', w));
      }
      node.appendChild(list);
    }
  }
}

namespace Private {
  export const LABELS: { [K in ConnectionStatus]: string } = {
    idle: 'Not connected',
    connecting: 'Connecting…',
    connected: 'Connected',
    restarting: 'Kernel restarting…',
    'no-bridge': 'Bridge not installed',
    'unsupported-kernel': 'Unsupported kernel',
    'protocol-mismatch': 'Version mismatch',
    error: 'Error'
  };

  export const RETRY: ReadonlyArray<ConnectionStatus> = [
    'no-bridge',
    'error',
    'protocol-mismatch'
  ];

  export function installLine(): HTMLElement {
    const row = h('div', 'vramscope-Status-install');
    row.appendChild(h('code', 'vramscope-Status-installLine', INSTALL_LINE));
    const copy = h('button', 'vramscope-Status-copy jp-mod-styled', 'Copy', {
      type: 'button',
      title: 'Copy to the clipboard'
    });
    copy.addEventListener('click', () => {
      void navigator.clipboard
        ?.writeText(INSTALL_LINE)
        .then(() => (copy.textContent = 'Copied'))
        .catch(() => (copy.textContent = 'Copy failed'));
    });
    row.appendChild(copy);
    return row;
  }
}
