/** Valid protocol v1 messages for the front-end tests. */
import {
  ICellRecord,
  IDeviceInfo,
  IHelloMessage,
  IInsight,
  ISettings,
  KernelMessage,
  PROTOCOL_VERSION
} from '../../src/protocol';

export const MIB = 1024 * 1024;

export function device(overrides: Partial<IDeviceInfo> = {}): IDeviceInfo {
  return {
    id: 'cpu',
    kind: 'cpu',
    name: 'CPU (glibc mallinfo2)',
    total_bytes: 16 * 1024 * MIB,
    used_bytes: 512 * MIB,
    reserved_bytes: 600 * MIB,
    initialized: true,
    source: 'mallinfo2',
    ...overrides
  };
}

export function settings(overrides: Partial<ISettings> = {}): ISettings {
  return {
    sample_hz: 10,
    cuda_peak_policy: 'reset',
    insight: true,
    insight_budget_ms: 20,
    history_limit: 36000,
    ...overrides
  };
}

export function record(overrides: Partial<ICellRecord> = {}): ICellRecord {
  return {
    cell_id: 'cell-a',
    execution_count: 1,
    start_time: 1700000000.5,
    duration: 0.25,
    ok: true,
    error_type: null,
    oom: false,
    code_head: 'x = torch.zeros(1024, 1024, 16)',
    devices: {
      cpu: {
        before_bytes: 100 * MIB,
        after_bytes: 164 * MIB,
        delta_bytes: 64 * MIB,
        peak_delta_bytes: 128 * MIB
      }
    },
    ...overrides
  };
}

export function insight(overrides: Partial<IInsight> = {}): IInsight {
  return {
    model: null,
    models: [],
    layers: [],
    breakdown: {},
    holders: [],
    scan_ms: 0,
    skipped: null,
    ...overrides
  };
}

export function hello(overrides: Partial<IHelloMessage> = {}): IHelloMessage {
  return {
    type: 'hello',
    protocol_version: PROTOCOL_VERSION,
    bridge_version: '0.1.0',
    session_id: 'kernel-1',
    kernel: {
      pid: 4242,
      python: '3.11.9',
      torch_version: '2.13.0+cpu',
      cuda_available: false,
      mps_available: false
    },
    devices: [device()],
    settings: settings(),
    cells: [],
    warnings: [],
    ...overrides
  };
}

/** A cpu device (100 MiB in its report), then samples at 300 MiB and 200 MiB. */
export function cpuAt300Then200(session: {
  handleMessage(message: KernelMessage): void;
}): void {
  session.handleMessage(
    hello({ devices: [device({ id: 'cpu', used_bytes: 100 * MIB })] })
  );
  session.handleMessage({
    type: 'samples',
    samples: [
      { t: 1, d: { cpu: { used: 300 * MIB } } },
      { t: 2, d: { cpu: { used: 200 * MIB } } }
    ],
    dropped: 0
  });
}
