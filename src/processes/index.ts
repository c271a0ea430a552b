/**
 * The `processes` plugin: the panel's Processes section (src/processes/): DataLoader workers
 * and ranks of the notebook's kernel, live, with copy-on-access findings.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';

import { IMemoryPanel } from '../tokens';
import { ProcessesView } from './view';

export { ProcessesModel } from './model';
export { ProcessesView } from './view';

/** Below Cells (200), above Model insight (300). */
const RANK = 250;

export const processesPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-vramscope:processes',
  description:
    "The panel's Processes section: DataLoader workers and ranks, live, with their memory.",
  autoStart: true,
  requires: [IMemoryPanel],
  activate: (app: JupyterFrontEnd, panel: IMemoryPanel) => {
    panel.addSection('Processes', new ProcessesView(), {
      rank: RANK,
      collapsed: true
    });
  }
};
