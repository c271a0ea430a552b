/**
 * The panel's Export section: an "Export report" button opening a menu of the formats (the
 * `vramscope:export-report` command with each format), and the last export's outcome.
 */
import type { CommandRegistry } from '@lumino/commands';
import { Menu, Widget } from '@lumino/widgets';

import {
  ConnectionStatus,
  IMemorySession,
  IMemorySessionView
} from '../tokens';
import { EXPORT_FORMATS } from './exporter';

export class ExportView extends Widget implements IMemorySessionView {
  constructor(options: ExportView.IOptions) {
    super();
    this.addClass('vramscope-Export');
    this._menu = new Menu({ commands: options.commands });
    this._menu.addClass('vramscope-ExportMenu');
    for (const { format } of EXPORT_FORMATS) {
      this._menu.addItem({ command: options.command, args: { format } });
    }
    const row = document.createElement('div');
    row.className = 'vramscope-Export-row';
    this._button = document.createElement('button');
    this._button.type = 'button';
    this._button.className = 'vramscope-Export-button jp-mod-styled';
    this._button.textContent = 'Export report…';
    this._button.setAttribute('aria-haspopup', 'menu');
    this._button.title = 'Save the session report next to the notebook';
    this._button.addEventListener('click', this);
    this._status = document.createElement('div');
    this._status.className = 'vramscope-Export-status';
    row.appendChild(this._button);
    this.node.append(row, this._status);
    this._update();
  }

  /** Show the outcome of the last export (a saved path or an error). */
  setStatus(text: string, error = false): void {
    this._status.textContent = text;
    this._status.classList.toggle('vramscope-mod-error', error);
  }

  setSession(session: IMemorySession | null): void {
    if (session !== this._session) {
      this.setStatus(''); // the last export was another notebook's
    }
    this._session?.statusChanged.disconnect(this._update, this);
    this._session = session;
    session?.statusChanged.connect(this._update, this);
    this._update();
  }

  handleEvent(event: Event): void {
    if (event.type === 'click' && !this._button.disabled) {
      const box = this._button.getBoundingClientRect();
      this._menu.open(box.left, box.bottom);
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._session?.statusChanged.disconnect(this._update, this);
    this._button.removeEventListener('click', this);
    this._menu.dispose();
    super.dispose();
  }

  private _update(): void {
    const status: ConnectionStatus | null = this._session?.status ?? null;
    this._button.disabled = status !== 'connected';
    this._button.title =
      status === 'connected'
        ? 'Save the session report next to the notebook'
        : 'Connect a notebook to its kernel to export its report';
  }

  private _session: IMemorySession | null = null;
  private _menu: Menu;
  private _button: HTMLButtonElement;
  private _status: HTMLDivElement;
}

export namespace ExportView {
  export interface IOptions {
    commands: CommandRegistry;
    /** The command run with `{format}` by each menu item. */
    command: string;
  }
}
