/**
 * The Optimize commands: refresh the advice, and insert a cell (a suggestion, its undo cell or
 * a mistake's fix) below the right cell after a preview. In the command palette and, for the
 * insertion, the notebook cell context menu. Inserting never runs the cell.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, ICommandPalette, showDialog } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';

import type { IMemorySession, IMemoryTracker } from '../tokens';
import { insertCell, insertables, placement } from './insert';
import type { OptimizeModels } from './model';
import { previewInsert } from './preview';

export namespace CommandIDs {
  export const refresh = 'jupyterlab-vramscope:optimize-refresh';
  export const insert = 'jupyterlab-vramscope:optimize-insert';
}

export interface IOptimizeCommandsOptions {
  notebooks: INotebookTracker;
  tracker: IMemoryTracker;
  models: OptimizeModels;
  palette: ICommandPalette | null;
}

export function addOptimizeCommands(
  app: JupyterFrontEnd,
  options: IOptimizeCommandsOptions
): void {
  const { notebooks, tracker, models, palette } = options;
  const { commands } = app;

  commands.addCommand(CommandIDs.refresh, {
    label: 'Refresh the vramscope Optimize Suggestions',
    caption: "Ask the active notebook's kernel for fresh memory advice",
    isEnabled: () => !!tracker.activeSession,
    execute: async () => {
      const session = tracker.activeSession;
      if (session) {
        await models.modelFor(session).refresh();
      }
    }
  });

  commands.addCommand(CommandIDs.insert, {
    label: args =>
      args.key
        ? 'Insert Cell Below…'
        : 'Insert a vramscope Optimization Cell Below…',
    caption:
      'Preview a cell that applies a vramscope suggestion, then insert it (it does not run)',
    isEnabled: () => !!tracker.activeSession,
    execute: async (args: ReadonlyPartialJSONObject) => {
      const session = tracker.activeSession;
      const panel = session
        ? Private.panelOf(notebooks, tracker, session)
        : null;
      if (!session || !panel) {
        return;
      }
      const model = models.modelFor(session);
      if (!model.advice || model.stale) {
        await model.refresh();
      }
      const items = insertables(model.advice);
      if (!items.length) {
        await showDialog({
          title: 'Nothing to insert',
          body:
            model.error ||
            'vramscope has no suggestion for this notebook yet: run a training step, then try again.',
          buttons: [Dialog.okButton()]
        });
        return;
      }
      const key = typeof args.key === 'string' ? args.key : items[0].key;
      const notebook = panel.content;
      const chosen = await previewInsert({
        items,
        selected: items.some(i => i.key === key) ? key : items[0].key,
        placement: item => placement(notebook, item).below
      });
      if (!chosen || panel.isDisposed) {
        return;
      }
      const index = insertCell(notebook, chosen);
      if (index >= 0) {
        app.shell.activateById(panel.id);
        void notebook.scrollToCell(notebook.widgets[index]);
      }
    }
  });

  const notify = () => {
    commands.notifyCommandChanged(CommandIDs.refresh);
    commands.notifyCommandChanged(CommandIDs.insert);
  };
  tracker.activeChanged.connect(notify);

  app.contextMenu.addItem({
    command: CommandIDs.insert,
    selector: '.jp-Notebook .jp-Cell',
    rank: 30
  });
  if (palette) {
    const category = 'vramscope';
    palette.addItem({ command: CommandIDs.refresh, category });
    palette.addItem({ command: CommandIDs.insert, category });
  }
}

namespace Private {
  /** The notebook panel whose session this is. */
  export function panelOf(
    notebooks: INotebookTracker,
    tracker: IMemoryTracker,
    session: IMemorySession
  ): NotebookPanel | null {
    return notebooks.find(w => tracker.sessionForWidget(w) === session) ?? null;
  }
}
