/**
 * One ProcessesModel per notebook session, shared by its users (the Processes section and the
 * timeline's process lanes): one `get_processes` request after each `hello`, one copy of the
 * lanes. The model is disposed when its last user releases it.
 */
import type { IMemorySession } from '../tokens';
import { ProcessesModel } from './model';

const users = new Map<ProcessesModel, number>();
const bySession = new WeakMap<IMemorySession, ProcessesModel>();

/** The session's model (created on first use); pair every call with `releaseProcesses`. */
export function acquireProcesses(session: IMemorySession): ProcessesModel {
  let model = bySession.get(session);
  if (!model || model.isDisposed) {
    model = new ProcessesModel(session);
    bySession.set(session, model);
  }
  users.set(model, (users.get(model) ?? 0) + 1);
  return model;
}

/** Give a model back; the last user's release disposes it. */
export function releaseProcesses(model: ProcessesModel): void {
  const left = (users.get(model) ?? 1) - 1;
  if (left > 0) {
    users.set(model, left);
    return;
  }
  users.delete(model);
  if (bySession.get(model.session) === model) {
    bySession.delete(model.session);
  }
  model.dispose();
}
