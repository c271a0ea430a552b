/**
 * Processes (since 1.1): the `processes` message (children and ranks).
 */
import { Check, Checks, describe } from './checks';

const { str, bool, num, int, bytes, literal, nullable, array, record, object } =
  Checks;

const processDevice = object({
  allocated: bytes,
  reserved: bytes,
  peak: bytes
});

const processInfo = object({
  key: str,
  pid: int,
  ppid: int,
  host: str,
  remote: bool,
  role: str,
  kind: literal('worker', 'rank', 'child'),
  index: nullable(int),
  world: nullable(int),
  cell: nullable(int),
  started: num,
  last_seen: num,
  rss: bytes,
  uss: nullable(bytes),
  pss: nullable(bytes),
  peak_rss: bytes,
  peak_uss: bytes,
  devices: record(processDevice),
  peak_devices: record(bytes),
  dropped: bytes,
  ended: nullable(num),
  exit: nullable(str),
  exit_code: nullable(int),
  signal: nullable(int),
  oom: bool
});

const processPoint: Check = (v, p) =>
  Array.isArray(v) && v.length === 4
    ? (num(v[0], `${p}[0]`) ??
      bytes(v[1], `${p}[1]`) ??
      nullable(bytes)(v[2], `${p}[2]`) ??
      bytes(v[3], `${p}[3]`))
    : `${p}: expected [t, rss, uss, device], got ${describe(v)}`;

const processFinding = object({
  kind: literal('copy_on_access'),
  cell: nullable(int),
  workers: array(str),
  num_workers: bytes,
  growth_bytes: bytes,
  projected_saving_bytes: bytes,
  dataset: object({
    name: nullable(str),
    type: str,
    containers: array(
      object({ name: str, type: str, length: bytes, bytes: bytes })
    )
  }),
  message: str,
  fixes: array(str)
});

export const processes = object(
  {
    time: num,
    full: bool,
    processes: array(processInfo),
    samples: record(array(processPoint)),
    findings: array(processFinding),
    stats: object(
      {
        received: bytes,
        dropped: bytes,
        refused: bytes,
        malformed: bytes,
        stale: bytes,
        processes_dropped: bytes,
        history_dropped: bytes
      },
      ['stale', 'processes_dropped', 'history_dropped']
    ),
    remote: nullable(str),
    changed_only: bool,
    forgotten: array(str)
  },
  ['changed_only', 'forgotten']
);
