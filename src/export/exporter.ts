/**
 * Export a session's report: ask the kernel for the rendered file (`export_report`, since
 * 1.1), validate it, save it next to the notebook through the contents API.
 */
import { PageConfig, PathExt, URLExt } from '@jupyterlab/coreutils';
import { Contents } from '@jupyterlab/services';

import { ExportFormat, IExportResult } from '../protocol';
import { IMemorySession } from '../tokens';
import { validateExportResult } from '../validate';
import { askOverwrite, ConfirmOverwrite, fileExists } from './overwrite';

/** The formats of the Export menu, in menu order. */
export const EXPORT_FORMATS: ReadonlyArray<{
  format: ExportFormat;
  label: string;
}> = [
  { format: 'html', label: 'HTML (interactive, offline)' },
  { format: 'markdown', label: 'Markdown' },
  { format: 'csv', label: 'CSV (cells)' },
  { format: 'json', label: 'JSON (report schema)' }
];

/** What an export wrote. */
export interface IExported {
  /** Server path of the saved file (next to the notebook). */
  path: string;
  result: IExportResult;
}

/** The server path a report named `filename` gets next to the notebook at `notebookPath`. */
export function reportPath(notebookPath: string, filename: string): string {
  const dir = PathExt.dirname(notebookPath);
  return dir ? PathExt.join(dir, filename) : filename;
}

/** The URL the server serves `path` at as a plain file (opens in a browser tab). */
export function filesUrl(path: string): string {
  return URLExt.join(
    PageConfig.getBaseUrl(),
    'files',
    URLExt.encodeParts(path)
  );
}

/**
 * Ask the kernel for the report in `format` and save it next to the notebook. A file already
 * there is replaced only when `confirm` says so (JupyterLab's dialog by default); null when
 * it said no (nothing saved).
 */
export async function exportReport(
  session: IMemorySession,
  format: ExportFormat,
  contents: Contents.IManager,
  confirm: ConfirmOverwrite = askOverwrite
): Promise<IExported | null> {
  const raw = await session.request('export_report', {
    format,
    notebook: session.path
  });
  const result = validateExportResult(raw, format);
  if (typeof result === 'string') {
    throw new Error(`the kernel's export is malformed (${result})`);
  }
  const path = reportPath(session.path, result.filename);
  if ((await fileExists(contents, path)) && !(await confirm(path))) {
    return null;
  }
  await contents.save(path, {
    type: 'file',
    format: 'text',
    content: result.content
  });
  return { path, result };
}
