/**
 * The Processes section's rows: one per process, except that the ended DataLoader workers of
 * one cell fold into one "N ended workers of cell [k]" row and lane (a loader without
 * `persistent_workers` starts new workers every epoch: 22 identical lanes said nothing). No DOM.
 */
import type { IProcessInfo, ProcessPoint } from '../protocol';
import { countOf } from '../words';

/** One row of the table: a process, or a cell's ended workers folded into one. */
export interface IProcessRow {
  /** The process key, or `ended-workers:<cell>` for a fold. */
  key: string;
  /** "DataLoader worker 0", "22 ended workers of cell [3]". */
  role: string;
  /** "cell [3] · pid 123", "exit code 0", "20 exit code 0, 2 killed by SIGKILL". */
  state: string;
  kind: IProcessInfo['kind'];
  ended: boolean;
  oom: boolean;
  /** The processes shown (one, or the fold's). */
  processes: IProcessInfo[];
}

/** Fold this many ended workers of a cell or more into one row. */
export const FOLD_AT = 2;

/** `a` then `b`, ..., with counts when some repeat: "20 exit code 0, 2 killed by SIGKILL". */
export function exitSummary(processes: ReadonlyArray<IProcessInfo>): string {
  const counts = new Map<string, number>();
  for (const p of processes) {
    const exit = p.exit ?? 'ended';
    counts.set(exit, (counts.get(exit) ?? 0) + 1);
  }
  if (counts.size === 1) {
    return [...counts.keys()][0];
  }
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([exit, n]) => `${n} ${exit}`)
    .join(', ');
}

function single(proc: IProcessInfo): IProcessRow {
  const where = proc.cell !== null ? `cell [${proc.cell}] · ` : '';
  const state =
    proc.ended !== null ? (proc.exit ?? 'ended') : `pid ${proc.pid}`;
  return {
    key: proc.key,
    role: proc.role,
    state: `${where}${state}`,
    kind: proc.kind,
    ended: proc.ended !== null,
    oom: proc.oom,
    processes: [proc]
  };
}

/**
 * The rows in the model's order; a cell's ended workers (`FOLD_AT` or more) become one row
 * where the first of them was.
 */
export function foldProcesses(
  processes: ReadonlyArray<IProcessInfo>
): IProcessRow[] {
  const groups = new Map<string, IProcessInfo[]>();
  const groupKey = (p: IProcessInfo) =>
    p.kind === 'worker' && p.ended !== null && !p.remote
      ? `ended-workers:${p.cell ?? '?'}`
      : null;
  for (const p of processes) {
    const key = groupKey(p);
    if (key) {
      const group = groups.get(key) ?? [];
      group.push(p);
      groups.set(key, group);
    }
  }
  const rows: IProcessRow[] = [];
  const placed = new Set<string>();
  for (const p of processes) {
    const key = groupKey(p);
    const group = key ? groups.get(key)! : null;
    if (!key || !group || group.length < FOLD_AT) {
      rows.push(single(p));
      continue;
    }
    if (placed.has(key)) {
      continue;
    }
    placed.add(key);
    const cell = p.cell !== null ? ` of cell [${p.cell}]` : '';
    rows.push({
      key,
      role: `${countOf(group.length, 'ended worker')}${cell}`,
      state: exitSummary(group),
      kind: 'worker',
      ended: true,
      oom: group.some(g => g.oom),
      processes: group
    });
  }
  return rows;
}

/** The lane of a row: its processes' points in time order (one process: its own). */
export function rowLane(
  row: IProcessRow,
  laneOf: (key: string) => ReadonlyArray<ProcessPoint>
): ReadonlyArray<ProcessPoint> {
  if (row.processes.length === 1) {
    return laneOf(row.processes[0].key);
  }
  const points: ProcessPoint[] = [];
  for (const p of row.processes) {
    points.push(...laneOf(p.key));
  }
  return points.sort((a, b) => a[0] - b[0]);
}

/**
 * A row's figures (`now` or `peak`): one process's own; for a fold, the most any one of its
 * processes held (now: when last seen), per device too.
 */
export function rowFigures(
  row: IProcessRow,
  which: 'now' | 'peak'
): { rss: number; uss: number | null; devices: { [id: string]: number } } {
  const devices: { [id: string]: number } = {};
  let rss = 0;
  let uss: number | null = null;
  for (const p of row.processes) {
    rss = Math.max(rss, which === 'now' ? p.rss : p.peak_rss);
    const u = which === 'now' ? p.uss : p.peak_uss;
    if (u !== null) {
      uss = Math.max(uss ?? 0, u);
    }
    const per: [string, number][] =
      which === 'now'
        ? Object.entries(p.devices).map(([id, d]) => [id, d.allocated])
        : Object.entries(p.peak_devices);
    for (const [id, bytes] of per) {
      devices[id] = Math.max(devices[id] ?? 0, bytes);
    }
  }
  return { rss, uss, devices };
}
