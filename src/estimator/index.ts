/**
 * The `estimator` plugin: adds the collapsed "Estimator" section to the vramscope panel.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';

import { IMemoryPanel, IMemoryTracker } from '../tokens';
import { EstimatorView } from './view';

export { EstimatorModel } from './model';
export { EstimatorView } from './view';

/** Below Insight (300). */
const RANK = 400;

export const estimatorPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-vramscope:estimator',
  description:
    'The panel calculator: training memory per GPU for a model or a size, and whether it fits.',
  autoStart: true,
  requires: [IMemoryPanel, IMemoryTracker],
  activate: (
    app: JupyterFrontEnd,
    panel: IMemoryPanel,
    tracker: IMemoryTracker
  ) => {
    const view = new EstimatorView({ units: () => tracker.settings.units });
    panel.addSection('Estimator', view, { rank: RANK, collapsed: true });
  }
};
