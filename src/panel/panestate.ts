import type { IStateDB } from '@jupyterlab/statedb';
import type { ReadonlyPartialJSONObject } from '@lumino/coreutils';

/**
 * Which of the panel's panes the user opened or closed, remembered in JupyterLab's state
 * database (one entry: `{expanded: {<title>: boolean}}`), so the panel reopens as it was left.
 * Without a state database it remembers for the page's life only.
 */
export class PaneState {
  constructor(options: PaneState.IOptions = {}) {
    this._state = options.state ?? null;
    this._key = options.key ?? PaneState.KEY;
  }

  /** Whether the user left `title` open; undefined when never toggled. */
  expanded(title: string): boolean | undefined {
    return this._expanded[title];
  }

  /** Read what was saved; resolves to the titles saved (empty without a state database). */
  async restore(): Promise<{ [title: string]: boolean }> {
    if (!this._state) {
      return {};
    }
    try {
      const saved = (await this._state.fetch(this._key)) as
        { expanded?: { [title: string]: unknown } } | undefined;
      for (const [title, open] of Object.entries(saved?.expanded ?? {})) {
        if (typeof open === 'boolean' && !(title in this._expanded)) {
          this._expanded[title] = open;
        }
      }
    } catch (reason) {
      console.warn('vramscope: could not read the panel layout', reason);
    }
    return { ...this._expanded };
  }

  /** The user opened or closed `title`: remember it. */
  set(title: string, expanded: boolean): void {
    if (this._expanded[title] === expanded) {
      return;
    }
    this._expanded[title] = expanded;
    if (this._state) {
      const value: ReadonlyPartialJSONObject = {
        expanded: { ...this._expanded }
      };
      this._state.save(this._key, value).catch(reason => {
        console.warn('vramscope: could not save the panel layout', reason);
      });
    }
  }

  private _state: IStateDB | null;
  private _key: string;
  private _expanded: { [title: string]: boolean } = {};
}

export namespace PaneState {
  export const KEY = 'jupyterlab-vramscope:panel-panes';

  export interface IOptions {
    state?: IStateDB | null;
    key?: string;
  }
}
