/**
 * Processes (since 1.1): child processes and ranks, the `processes` message (docs/protocol.md).
 */
import type { DeviceId } from '../protocol';

/** Since 1.1: one device's allocator figures in a child process. */
export interface IProcessDevice {
  allocated: number;
  reserved: number;
  peak: number;
}

/** Since 1.1: a child process or rank reporting to the kernel (docs/protocol.md "Processes"). */
export interface IProcessInfo {
  /** `host:pid`. */
  key: string;
  pid: number;
  ppid: number;
  host: string;
  /** Reported over the opt-in UDP port (another host, or a process not forked here). */
  remote: boolean;
  /** "DataLoader worker 0", "rank 1", "child pid 1234" (+ " @ host" when remote). */
  role: string;
  kind: 'worker' | 'rank' | 'child';
  /** Worker id or rank. */
  index: number | null;
  /** num_workers or world size. */
  world: number | null;
  /** Execution count of the cell that forked it. */
  cell: number | null;
  started: number;
  last_seen: number;
  rss: number;
  uss: number | null;
  pss: number | null;
  peak_rss: number;
  peak_uss: number;
  devices: { [id: DeviceId]: IProcessDevice };
  peak_devices: { [id: DeviceId]: number };
  dropped: number;
  /** Kernel time it was seen ending, or null while it runs. */
  ended: number | null;
  /** "exit code 0", "killed by SIGKILL", "killed by the OOM killer (SIGKILL)", ... */
  exit: string | null;
  exit_code: number | null;
  signal: number | null;
  oom: boolean;
}

/** One lane point: [kernel time, rss, uss (null when not read), device bytes allocated]. */
export type ProcessPoint = [number, number, number | null, number];

export interface IDatasetContainer {
  name: string;
  type: string;
  length: number;
  bytes: number;
}

/** Since 1.1: DataLoader workers copying a dataset of Python objects page by page. */
export interface IProcessFinding {
  kind: 'copy_on_access';
  cell: number | null;
  /** Keys of the workers showing it. */
  workers: string[];
  num_workers: number;
  growth_bytes: number;
  projected_saving_bytes: number;
  dataset: {
    name: string | null;
    type: string;
    containers: IDatasetContainer[];
  };
  message: string;
  fixes: string[];
}

export interface IProcessStats {
  received: number;
  dropped: number;
  refused: number;
  malformed: number;
  /** Reports refused as replayed or out of the time window (optional; since 1.1). */
  stale?: number;
  /** Reports of new processes turned away: the live cap was reached (optional; since 1.1). */
  processes_dropped?: number;
  /** Lane points trimmed to keep the total history under its cap (optional; since 1.1). */
  history_dropped?: number;
}

/** Since 1.1: child processes and ranks; `full` answers carry every kept lane point. */
export interface IProcessesMessage {
  type: 'processes';
  time: number;
  full: boolean;
  processes: IProcessInfo[];
  /** New lane points by process key (all kept points when `full`). */
  samples: { [key: string]: ProcessPoint[] };
  findings: IProcessFinding[];
  stats: IProcessStats;
  /** The UDP address remote ranks report to, when listening. */
  remote: string | null;
  /**
   * Since 1.1 (optional): `processes` holds only the processes whose info changed since the
   * last incremental message (merge by key), and `forgotten` the keys the kernel let go.
   */
  changed_only?: boolean;
  forgotten?: string[];
}
