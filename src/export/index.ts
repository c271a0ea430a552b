/**
 * The `export` plugin: the panel's Export section and the `vramscope:export-report` command
 * (`{format: 'html' | 'markdown' | 'csv' | 'json'}`): the kernel renders the report, it is
 * saved next to the notebook, then opened (HTML in a new browser tab, the others in
 * JupyterLab) with a notification.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, Notification } from '@jupyterlab/apputils';

import { ExportFormat } from '../protocol';
import { IMemoryPanel, IMemoryTracker } from '../tokens';
import { EXPORT_FORMATS, exportReport, filesUrl } from './exporter';
import { ExportView } from './view';

export { exportReport, filesUrl, reportPath } from './exporter';
export { askOverwrite, fileExists } from './overwrite';
export { ExportView } from './view';

namespace CommandIDs {
  export const exportReport = 'vramscope:export-report';
}

/** Right under the status header, above Devices (100). */
const RANK = 50;

export const exportPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-vramscope:export',
  description:
    'Exports the session report (HTML, Markdown, CSV, JSON) next to the notebook.',
  autoStart: true,
  requires: [IMemoryPanel, IMemoryTracker],
  optional: [ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    panel: IMemoryPanel,
    tracker: IMemoryTracker,
    palette: ICommandPalette | null
  ) => {
    const view = new ExportView({
      commands: app.commands,
      command: CommandIDs.exportReport
    });
    const labelOf = (format: unknown) =>
      EXPORT_FORMATS.find(f => f.format === format)?.label ?? String(format);
    app.commands.addCommand(CommandIDs.exportReport, {
      label: args =>
        args.menu === false
          ? `Export vramscope Report as ${labelOf(args.format)}`
          : labelOf(args.format),
      caption: 'Save the memory report next to the notebook and open it',
      isEnabled: () => tracker.activeSession?.status === 'connected',
      execute: async args => {
        const session = tracker.activeSession;
        const format = (args.format ?? 'html') as ExportFormat;
        if (!session) {
          return;
        }
        // A tab opened now, while the click still counts as a user gesture, is not blocked.
        const tab = format === 'html' ? window.open('', '_blank') : null;
        try {
          const exported = await exportReport(
            session,
            format,
            app.serviceManager.contents
          );
          if (!exported) {
            tab?.close();
            view.setStatus('Export cancelled: the existing report was kept');
            return;
          }
          const { path } = exported;
          const open = () => {
            if (format !== 'html') {
              void app.commands.execute('docmanager:open', { path });
            } else if (tab && !tab.closed) {
              tab.location.href = filesUrl(path);
            } else {
              window.open(filesUrl(path), '_blank');
            }
          };
          open();
          view.setStatus(`Saved ${path}`);
          Notification.success(`vramscope report saved: ${path}`, {
            autoClose: 5000,
            actions: [
              {
                label: 'Open',
                callback: () => window.open(filesUrl(path), '_blank')
              }
            ]
          });
        } catch (reason) {
          tab?.close();
          const message =
            reason instanceof Error ? reason.message : String(reason);
          view.setStatus(`Export failed: ${message}`, true);
          Notification.error(`vramscope export failed: ${message}`, {
            autoClose: false
          });
        }
      }
    });
    tracker.activeChanged.connect(() =>
      app.commands.notifyCommandChanged(CommandIDs.exportReport)
    );
    if (palette) {
      for (const { format } of EXPORT_FORMATS) {
        palette.addItem({
          command: CommandIDs.exportReport,
          args: { format, menu: false },
          category: 'vramscope'
        });
      }
    }
    panel.addSection('Export', view, { rank: RANK, collapsed: true });
  }
};
