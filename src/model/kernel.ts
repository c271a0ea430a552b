/**
 * Kernel-connection helpers of the bridge (`KernelBridge`): running code silently, the
 * kernel's language, whether it is going away, and kernel message fields.
 */
import { Kernel, KernelMessage } from '@jupyterlab/services';

import { IHelloMessage, ISettings, PROTOCOL_VERSION } from '../protocol';
import type { ConnectionStatus } from '../tokens';

/** The code the front end runs silently to load the bridge in the kernel. */
export const BOOTSTRAP_CODE = '__import__("vramscope")._bootstrap()';

/** The exact line shown when the bridge is not installed. */
export const INSTALL_LINE = '%pip install vramscope';

/** The shell reply to a silent execute. */
export interface IExecuteResult {
  status: string;
  ename?: string;
  evalue?: string;
}

/** A kernel message date (ISO 8601) in UNIX seconds; now when it is missing or invalid. */
export function kernelTime(date: unknown): number {
  const ms = typeof date === 'string' ? Date.parse(date) : NaN;
  return (Number.isFinite(ms) ? ms : Date.now()) / 1000;
}

/** The first non-empty line of `code`, trimmed, at most 120 characters (the bridge's). */
export function codeHead(code: string): string {
  for (const line of code.split('\n')) {
    const text = line.trim();
    if (text) {
      return text.slice(0, 120);
    }
  }
  return '';
}

/** Whether the kernel is on its way out or between processes. */
export function isKernelGoing(kernel: Kernel.IKernelConnection): boolean {
  const s = kernel.status;
  return (
    kernel.isDisposed ||
    s === 'restarting' ||
    s === 'autorestarting' ||
    s === 'dead' ||
    s === 'terminating'
  );
}

/** The kernel's language from its spec, else from kernel_info (null: unknown). */
export async function kernelLanguage(
  kernel: Kernel.IKernelConnection
): Promise<string | null> {
  try {
    const spec = await kernel.spec;
    if (spec?.language) {
      return spec.language;
    }
  } catch {
    // fall through to kernel_info
  }
  try {
    const info = await kernel.info;
    return info?.language_info?.name ?? null;
  } catch {
    return null;
  }
}

/** Run `code` silently; resolves with the shell reply (not waiting for iopub `idle`). */
export function executeSilently(
  kernel: Kernel.IKernelConnection,
  code: string
): Promise<IExecuteResult> {
  return new Promise<IExecuteResult>((resolve, reject) => {
    const future = kernel.requestExecute(
      {
        code,
        silent: true,
        store_history: false,
        allow_stdin: false,
        stop_on_error: false
      },
      true
    );
    future.onReply = (reply: KernelMessage.IExecuteReplyMsg) => {
      const content =
        reply.content as KernelMessage.IExecuteReplyMsg['content'] & {
          ename?: string;
          evalue?: string;
        };
      resolve({
        status: content.status,
        ename: content.ename,
        evalue: content.evalue
      });
    };
    // Rejects when the future is disposed before its reply (restart, shutdown).
    future.done.then(
      () => reject(new Error('the bootstrap got no reply')),
      (e: unknown) => reject(e instanceof Error ? e : new Error(String(e)))
    );
  });
}

/** The status a failed bootstrap leaves (null: it succeeded). */
export function bootstrapFailure(
  reply: IExecuteResult
): { status: ConnectionStatus; message: string } | null {
  if (reply.status === 'ok') {
    return null;
  }
  if (reply.status !== 'error') {
    return { status: 'error', message: `The bootstrap was ${reply.status}.` };
  }
  if (
    reply.ename === 'ModuleNotFoundError' &&
    /vramscope/.test(reply.evalue ?? '')
  ) {
    return {
      status: 'no-bridge',
      message: `vramscope is not installed in this kernel's environment. Run: ${INSTALL_LINE}`
    };
  }
  return {
    status: 'error',
    message: `The vramscope bridge failed to load: ${reply.ename}: ${reply.evalue}`
  };
}

/** Whether applying `patch` would change `current` (null: unknown, so yes). */
export function settingsDiffer(
  patch: Partial<ISettings>,
  current: ISettings | null
): boolean {
  if (!current) {
    return true;
  }
  return (Object.keys(patch) as (keyof ISettings)[]).some(
    k => patch[k] !== undefined && patch[k] !== current[k]
  );
}

/** Why a `hello` cannot be used (its protocol's major version differs), or null. */
export function protocolMismatch(msg: IHelloMessage): string | null {
  const major = (version: string) => version.split('.')[0].trim();
  if (major(msg.protocol_version) === major(PROTOCOL_VERSION)) {
    return null;
  }
  return (
    `Protocol mismatch: this front end speaks vramscope protocol ${PROTOCOL_VERSION}, ` +
    `the kernel bridge ${msg.protocol_version} (bridge ${msg.bridge_version}). ` +
    'Install matching versions of jupyterlab-vramscope and vramscope.'
  );
}
