/**
 * Never overwrite without asking: whether a report file is already there, and the dialog
 * that asks before it is replaced.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { Contents } from '@jupyterlab/services';

/** Asks whether the file at `path` may be replaced; true only on an explicit yes. */
export type ConfirmOverwrite = (path: string) => Promise<boolean>;

/** Whether `path` exists on the server (a 404 says no; any other failure is thrown). */
export async function fileExists(
  contents: Contents.IManager,
  path: string
): Promise<boolean> {
  try {
    await contents.get(path, { content: false });
    return true;
  } catch (reason) {
    if (Private.status(reason) === 404) {
      return false;
    }
    throw reason;
  }
}

/** JupyterLab's dialog: Cancel (the default) keeps the file, Replace overwrites it. */
export async function askOverwrite(path: string): Promise<boolean> {
  const result = await showDialog({
    title: 'Replace the existing report?',
    body: `${path} already exists. Replace it with this session's report?`,
    buttons: [
      Dialog.cancelButton({ label: 'Keep it' }),
      Dialog.warnButton({ label: 'Replace' })
    ],
    defaultButton: 0
  });
  return result.button.accept;
}

namespace Private {
  export function status(reason: unknown): number | undefined {
    const response = (reason as { response?: { status?: unknown } } | null)
      ?.response;
    return typeof response?.status === 'number' ? response.status : undefined;
  }
}
