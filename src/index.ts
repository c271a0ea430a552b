/**
 * vramscope front end: PyTorch memory per notebook cell.
 *
 * Plugins (ids `jupyterlab-vramscope:<name>`):
 * - `plugin`: the `IMemoryTracker` (one session + kernel connection per notebook) and the
 *   settings (schema/plugin.json);
 * - `panel`: the right-sidebar panel (`IMemoryPanel`, to which other plugins add sections) and
 *   the commands;
 * - `footer`: the per-cell memory footers and cell metadata;
 * - `timeline`: the panel's live memory timeline section (plotly, loaded on first draw), with
 *   the sample-rate picker writing the `sampleHz` setting;
 * - `insight`: the panel's model insight section (per-layer chart, breakdown, holders).
 * - `export`: the panel's Export section and the `vramscope:export-report` command: the
 *   session report as HTML, Markdown, CSV or JSON next to the notebook (src/export/).
 * - `estimator`: the panel's Estimator section (collapsed): training memory per GPU for a
 *   model or a typed size, and whether it fits (src/estimator/).
 * - `widget`: registers `vramscope.widget()`'s inline chart with the ipywidgets manager
 *   (src/widget/; `@jupyter-widgets/base` is loaded lazily).
 * - `optimize`: the panel's Optimize section (suggestions, cells to insert, predicted vs
 *   measured) and its commands (src/optimize/).
 *
 * Works in JupyterLab 4 and Jupyter Notebook 7 (`ILabShell` is optional).
 */
import {
  ILabShell,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, IThemeManager } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStateDB } from '@jupyterlab/statedb';

import { CellFooterManager } from './footer';
import { vramscopeIcon } from './icons';
import { InsightView } from './insight/view';
import { estimatorPlugin } from './estimator';
import { widgetPlugin } from './widget';
import { exportPlugin } from './export';
import { optimizePlugin } from './optimize';
import { processesPlugin } from './processes';
import { MemoryTracker, parseSettings } from './model';
import { MemoryPanel, PaneState } from './panel';
import { TimelineView } from './timeline/view';
import { IMemoryPanel, IMemorySession, IMemoryTracker } from './tokens';

export * from './tokens';

namespace CommandIDs {
  export const togglePanel = 'vramscope:toggle-panel';
  export const clearHistory = 'vramscope:clear-history';
}

const PLUGIN_ID = 'jupyterlab-vramscope:plugin';

const trackerPlugin: JupyterFrontEndPlugin<IMemoryTracker> = {
  id: PLUGIN_ID,
  description:
    'Tracks the PyTorch memory of each open notebook through the vramscope bridge.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ISettingRegistry],
  provides: IMemoryTracker,
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    registry: ISettingRegistry | null
  ): IMemoryTracker => {
    const tracker = new MemoryTracker({
      notebookTracker: notebooks,
      activate: (panel: NotebookPanel) => app.shell.activateById(panel.id)
    });
    if (registry) {
      void registry
        .load(PLUGIN_ID)
        .then(settings => {
          const apply = () =>
            tracker.setSettings(parseSettings(settings.composite));
          settings.changed.connect(apply);
          apply();
        })
        .catch(reason =>
          console.error('vramscope: could not load settings', reason)
        );
    }
    return tracker;
  }
};

const panelPlugin: JupyterFrontEndPlugin<IMemoryPanel> = {
  id: 'jupyterlab-vramscope:panel',
  description:
    'The vramscope side panel: connection, devices and per-cell memory.',
  autoStart: true,
  requires: [IMemoryTracker],
  optional: [ILabShell, ICommandPalette, IStateDB],
  provides: IMemoryPanel,
  activate: (
    app: JupyterFrontEnd,
    tracker: IMemoryTracker,
    labShell: ILabShell | null,
    palette: ICommandPalette | null,
    state: IStateDB | null
  ): IMemoryPanel => {
    const panel = new MemoryPanel({
      tracker,
      panes: new PaneState({ state })
    });
    // Notebook 7's shell supports the 'right' area too.
    app.shell.add(panel, 'right', { rank: 900 });

    app.commands.addCommand(CommandIDs.togglePanel, {
      label: 'Toggle the vramscope Memory Panel',
      caption: 'Show or hide PyTorch memory per cell',
      icon: vramscopeIcon,
      isToggled: () => panel.isVisible,
      execute: () => {
        if (panel.isVisible) {
          if (labShell) {
            labShell.collapseRight();
          } else {
            // Notebook 7 shell: collapse the right area when it can.
            (
              app.shell as unknown as { collapseRight?: () => void }
            ).collapseRight?.();
          }
        } else {
          app.shell.activateById(panel.id);
        }
      }
    });
    app.commands.addCommand(CommandIDs.clearHistory, {
      label: 'Clear the vramscope Memory History',
      caption: "Forget the active notebook's per-cell memory history",
      isEnabled: () => !!tracker.activeSession,
      execute: async () => {
        await tracker.activeSession?.clearHistory?.();
      }
    });
    tracker.activeChanged.connect(() =>
      app.commands.notifyCommandChanged(CommandIDs.clearHistory)
    );
    if (palette) {
      const category = 'vramscope';
      palette.addItem({ command: CommandIDs.togglePanel, category });
      palette.addItem({ command: CommandIDs.clearHistory, category });
    }
    return panel;
  }
};

const footerPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-vramscope:footer',
  description:
    'Shows the memory change and peak under each executed code cell.',
  autoStart: true,
  requires: [INotebookTracker, IMemoryTracker],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    tracker: IMemoryTracker
  ) => {
    const attach = (widget: NotebookPanel) => {
      const session = tracker.sessionForWidget(widget);
      if (!session || widget.isDisposed) {
        return;
      }
      const manager = new CellFooterManager({
        panel: widget,
        session,
        tracker
      });
      widget.disposed.connect(() => manager.dispose());
    };
    tracker.sessionAdded.connect((_, { widget }) =>
      attach(widget as NotebookPanel)
    );
    notebooks.forEach(widget => attach(widget));
  }
};

/**
 * Pane ranks: Export 50, Devices 100, Timeline 150, Cells 200, Processes 250, Insight 300,
 * Optimize 350, Estimator 400. Timeline and Cells start open, the others closed (every
 * pane's header stays in sight: Optimize is one click away at any panel height).
 */
namespace Ranks {
  export const timeline = 150;
  export const insight = 300;
}

const timelinePlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-vramscope:timeline',
  description:
    "The panel's live memory timeline, with cells as bands and a sample-rate picker.",
  autoStart: true,
  requires: [IMemoryPanel, IMemoryTracker],
  optional: [IThemeManager, ISettingRegistry],
  activate: (
    app: JupyterFrontEnd,
    panel: IMemoryPanel,
    tracker: IMemoryTracker,
    themeManager: IThemeManager | null,
    registry: ISettingRegistry | null
  ) => {
    const setSampleHz = async (
      hz: number,
      session: IMemorySession | null
    ): Promise<void> => {
      if (registry) {
        // The tracker pushes the change to every kernel (set_settings) and the Settings
        // Editor shows it.
        try {
          await registry.set(PLUGIN_ID, 'sampleHz', hz);
          return;
        } catch (reason) {
          console.warn(
            'vramscope: could not save sampleHz; setting the kernel only',
            reason
          );
        }
      }
      await session?.request('set_settings', { sample_hz: hz });
    };
    const view = new TimelineView({ themeManager, setSampleHz });
    view.sampleHzFallback = tracker.settings.sampleHz;
    view.units = tracker.settings.units;
    tracker.settingsChanged.connect((_, settings) => {
      view.sampleHzFallback = settings.sampleHz;
      view.units = settings.units;
    });
    panel.addSection('Timeline', view, { rank: Ranks.timeline, share: 3 });
  }
};

const insightPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-vramscope:insight',
  description:
    "The panel's model insight: per-layer activations, memory breakdown and holders.",
  autoStart: true,
  requires: [IMemoryPanel],
  activate: (app: JupyterFrontEnd, panel: IMemoryPanel) => {
    panel.addSection('Model insight', new InsightView(), {
      rank: Ranks.insight,
      collapsed: true
    });
  }
};

const plugins: JupyterFrontEndPlugin<any>[] = [
  trackerPlugin,
  panelPlugin,
  footerPlugin,
  timelinePlugin,
  estimatorPlugin,
  widgetPlugin,
  exportPlugin,
  insightPlugin,
  optimizePlugin,
  processesPlugin
];

export default plugins;
