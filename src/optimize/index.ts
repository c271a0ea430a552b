/**
 * The `optimize` plugin: the panel's Optimize section, its commands (palette and cell context
 * menu) and one `OptimizeModel` per notebook session.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';

import { IMemoryPanel, IMemoryTracker } from '../tokens';
import { addOptimizeCommands, CommandIDs } from './commands';
import { OptimizeModels } from './model';
import { BestAction } from './best';
import { OptimizeView } from './view';

export { CommandIDs as OptimizeCommandIDs } from './commands';

/** Below Model insight (300). */
const RANK = 350;
const TITLE = 'Optimize';

export const optimizePlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-vramscope:optimize',
  description:
    "The panel's Optimize section: ranked memory suggestions with predicted savings, cells to insert in the user's names, and predicted vs measured.",
  autoStart: true,
  requires: [IMemoryPanel, IMemoryTracker, INotebookTracker],
  optional: [ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    panel: IMemoryPanel,
    tracker: IMemoryTracker,
    notebooks: INotebookTracker,
    palette: ICommandPalette | null
  ) => {
    const models = new OptimizeModels();
    addOptimizeCommands(app, { notebooks, tracker, models, palette });
    const view = new OptimizeView({
      models,
      units: () => tracker.settings.units,
      onInsert: key => void app.commands.execute(CommandIDs.insert, { key })
    });
    panel.addSection(TITLE, view, {
      rank: RANK,
      collapsed: true,
      toolbar: view.toolbarItems
    });
    // the answer line at the top of the panel: the best action, a link to its card
    panel.setBestActionSource(
      new BestAction({
        models,
        units: () => tracker.settings.units,
        reveal: id => {
          panel.revealSection(TITLE);
          // shown now: its model asks for advice if stale; the card is drawn from the last
          requestAnimationFrame(() => view.revealCard(id));
        },
        open: () => void panel.revealSection(TITLE)
      })
    );
  }
};
