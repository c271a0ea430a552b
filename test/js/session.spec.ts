import { IRequestMessage } from '../../src/protocol';
import { MemorySession, RequestError } from '../../src/model/session';
import { ConnectionStatus } from '../../src/tokens';
import { device, hello, insight as makeInsight, record } from './fixtures';

function connected(sent: IRequestMessage[] = []): MemorySession {
  const s = new MemorySession({
    path: 'nb.ipynb',
    requestTimeoutMs: 1000,
    now: () => 42
  });
  s.setTransport(m => sent.push(m));
  s.handleMessage(hello());
  return s;
}

describe('MemorySession: backfill of the kernel-kept samples', () => {
  const sample = (t: number, used = 1000) => ({ t, d: { cpu: { used } } });

  it('fetches every kept sample on a fresh page, then only newer ones', async () => {
    const sent: IRequestMessage[] = [];
    const s = new MemorySession({ path: 'nb.ipynb', now: () => 42 });
    s.setTransport(m => sent.push(m));
    const added: number[] = [];
    s.samplesAdded.connect((_, batch) => added.push(batch.length));
    s.handleMessage(hello());
    void s.backfillSamples(); // the bridge asks once the kernel is idle
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ method: 'get_samples', params: {} });
    // a live batch arrives before the reply; the reply repeats it
    s.handleMessage({ type: 'samples', samples: [sample(13)], dropped: 0 });
    s.handleMessage({
      type: 'reply',
      id: sent[0].id,
      ok: true,
      result: { samples: [sample(10), sample(11), sample(12), sample(13)] }
    });
    await Promise.resolve();
    await Promise.resolve();
    expect(s.samples.toArray().map(x => x.t)).toEqual([10, 11, 12, 13]);
    expect(added).toEqual([1, 3]);

    // reconnecting (a new hello from the same kernel) asks only for what is newer than
    // what was held at that hello, even when live samples came in before the kernel went
    // idle and the request was sent
    s.handleMessage(hello());
    s.handleMessage({ type: 'samples', samples: [sample(20)], dropped: 0 });
    void s.backfillSamples();
    expect(sent[1]).toMatchObject({
      method: 'get_samples',
      params: { since: 13 }
    });
    s.handleMessage({
      type: 'reply',
      id: sent[1].id,
      ok: true,
      result: { samples: [sample(14), { t: 'bad' }] }
    });
    await Promise.resolve();
    await Promise.resolve();
    // an invalid sample drops the reply (with a warning), nothing half-applied
    expect(s.samples.toArray().map(x => x.t)).toEqual([10, 11, 12, 13, 20]);
    expect(s.warnings[s.warnings.length - 1]).toMatch(/invalid sample/);
    s.dispose();
  });
});

describe('MemorySession: messages', () => {
  it('hello connects and sets kernel, devices, settings', () => {
    const s = connected();
    expect(s.status).toBe('connected');
    expect(s.kernel?.pid).toBe(4242);
    expect(s.devices.map(d => d.id)).toEqual(['cpu']);
    expect(s.settings?.sample_hz).toBe(10);
    expect(s.epoch).toBe(0);
  });

  it('hello warnings (torch missing) become the status message and warnings', () => {
    const s = new MemorySession({ path: 'nb.ipynb' });
    s.handleMessage(
      hello({ warnings: ['torch is not installed in this kernel'] })
    );
    expect(s.statusMessage).toBe('torch is not installed in this kernel');
    expect(s.warnings).toContain('torch is not installed in this kernel');
  });

  it('a devices message with warnings replaces the stale hello warnings only', () => {
    const s = new MemorySession({ path: 'nb.ipynb' });
    const stale =
      'torch is not imported yet: CUDA/MPS devices appear once it is';
    s.handleMessage(hello({ warnings: [stale] }));
    s.addWarning('front-end warning');
    expect(s.statusMessage).toBe(stale);
    s.handleMessage({ type: 'devices', devices: [device()], warnings: [] });
    expect(s.warnings).toEqual(['front-end warning']);
    expect(s.statusMessage).toBe('');
    expect(s.status).toBe('connected');
    s.handleMessage({ type: 'devices', devices: [device()] });
    expect(s.warnings).toEqual(['front-end warning']);
  });

  it('a protocol major mismatch names both versions and does not connect', () => {
    const s = new MemorySession({ path: 'nb.ipynb' });
    s.handleMessage(hello({ protocol_version: '2.0.0' }));
    expect(s.status).toBe('protocol-mismatch');
    expect(s.statusMessage).toContain('1.1.0');
    expect(s.statusMessage).toContain('2.0.0');
  });

  it('a minor version difference is accepted', () => {
    const s = new MemorySession({ path: 'nb.ipynb' });
    s.handleMessage(hello({ protocol_version: '1.3.0' }));
    expect(s.status).toBe('connected');
  });

  it('cell messages are recorded with the epoch and emit cellRecorded', () => {
    const s = connected();
    const seen: number[] = [];
    s.cellRecorded.connect((_, e) => seen.push(e.record.execution_count!));
    s.handleMessage({
      type: 'cell',
      record: record(),
      devices: [device({ used_bytes: 7 })]
    });
    expect(seen).toEqual([1]);
    expect(s.cells).toHaveLength(1);
    expect(s.cells[0].epoch).toBe(0);
    expect(s.devices[0].used_bytes).toBe(7);
  });

  it('a cells message (since 1.1) records each cell in order', () => {
    const s = connected();
    const seen: number[] = [];
    s.cellRecorded.connect((_, e) => seen.push(e.record.execution_count!));
    s.handleMessage({
      type: 'cells',
      records: [1, 2, 3].map(n =>
        record({
          execution_count: n,
          cell_id: `c${n}`,
          start_time: 1700000000 + n
        })
      ),
      devices: [device({ used_bytes: 9 })]
    });
    expect(seen).toEqual([1, 2, 3]);
    expect(s.cells.map(c => c.record.cell_id)).toEqual(['c1', 'c2', 'c3']);
    expect(s.devices[0].used_bytes).toBe(9);
    // one invalid record drops the whole message: nothing half-applied
    const warn = jest
      .spyOn(console, 'warn')
      .mockImplementation(() => undefined);
    s.handleMessage({
      type: 'cells',
      records: [
        record({ execution_count: 4 }),
        { ...record(), duration: 'slow' }
      ],
      devices: []
    });
    expect(s.cells).toHaveLength(3);
    expect(s.warnings[s.warnings.length - 1]).toMatch(
      /invalid message.*records/
    );
    warn.mockRestore();
  });

  it('samples are bounded by the ring buffer', () => {
    const s = new MemorySession({ path: 'nb.ipynb', sampleCapacity: 3 });
    let added = 0;
    s.samplesAdded.connect((_, batch) => (added += batch.length));
    const samples = [1, 2, 3, 4, 5].map(t => ({ t, d: { cpu: { used: t } } }));
    s.handleMessage({ type: 'samples', samples, dropped: 0 });
    expect(added).toBe(5);
    expect(s.samples.length).toBe(3);
    expect(s.samples.toArray().map(x => x.t)).toEqual([3, 4, 5]);
  });

  it('insight and notice messages', () => {
    const s = connected();
    const insight = makeInsight({ skipped: 'over budget' });
    s.handleMessage({ type: 'insight', insight });
    expect(s.insight).toEqual(insight);
    s.handleMessage({
      type: 'notice',
      level: 'warning',
      message: 'scan skipped'
    });
    expect(s.warnings[s.warnings.length - 1]).toBe('scan skipped');
  });

  it("hello carries the kernel's last insight (since 1.1): shown without asking", () => {
    const s = new MemorySession({ path: 'a.ipynb' });
    const seen: unknown[] = [];
    s.insightChanged.connect((_, i) => seen.push(i));
    const insight = makeInsight({ skipped: null });
    s.handleMessage(hello({ insight }));
    expect(s.status).toBe('connected');
    expect(s.insight).toEqual(insight);
    expect(seen).toEqual([insight]);
    // a 1.0 hello (no insight) leaves what is shown alone
    s.handleMessage(hello());
    expect(s.insight).toEqual(insight);
    expect(seen).toHaveLength(1);
  });

  it('an invalid message produces a warning, not a throw', () => {
    const s = connected();
    const warn = jest
      .spyOn(console, 'warn')
      .mockImplementation(() => undefined);
    let result: unknown = 'not called';
    expect(() => {
      result = s.handleMessage({
        type: 'cell',
        record: { ...record(), duration: 'slow' }
      });
    }).not.toThrow();
    expect(result).toBeNull();
    expect(s.cells).toHaveLength(0);
    expect(s.warnings[s.warnings.length - 1]).toMatch(
      /^Dropped an invalid message.*duration/
    );
    expect(s.status).toBe('connected');
    warn.mockRestore();
  });

  it('answers an invalid kernel message with a report_error request (capped)', () => {
    const sent: IRequestMessage[] = [];
    const s = connected(sent);
    const warn = jest
      .spyOn(console, 'warn')
      .mockImplementation(() => undefined);
    s.handleMessage({ type: 'samples', samples: 'many' });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({
      type: 'request',
      method: 'report_error',
      params: { code: 'invalid_message' }
    });
    expect((sent[0].params as any).message).toMatch(/samples/);
    // the kernel's reply settles it; a flood is reported at most 20 times
    s.handleMessage({
      type: 'reply',
      id: sent[0].id,
      ok: true,
      result: { kept: 1 }
    });
    for (let i = 0; i < 50; i++) {
      s.handleMessage({ type: 'nonsense' });
    }
    expect(sent.filter(m => m.method === 'report_error')).toHaveLength(20);
    warn.mockRestore();
    s.dispose();
  });
});

describe('MemorySession: restarts and rehydration', () => {
  it('keeps history across a restart and marks the epoch', () => {
    const s = connected();
    s.handleMessage({ type: 'cell', record: record(), devices: [] });
    s.markRestart(1234);
    expect(s.epoch).toBe(1);
    expect(s.restarts).toEqual([1234]);
    s.handleMessage(hello({ session_id: 'kernel-2' }));
    // a new kernel process after a restart we saw: no second epoch bump
    expect(s.epoch).toBe(1);
    s.handleMessage({
      type: 'cell',
      record: record({ execution_count: 1, start_time: 1700000100 }),
      devices: []
    });
    expect(s.cells.map(c => [c.record.execution_count, c.epoch])).toEqual([
      [1, 0],
      [1, 1]
    ]);
  });

  it('a new session_id without a seen restart bumps the epoch', () => {
    const s = connected();
    s.handleMessage(hello({ session_id: 'kernel-other' }));
    expect(s.epoch).toBe(1);
    expect(s.restarts).toEqual([42]);
  });

  it('merges hello history without duplicates (cell_id + execution_count + start_time)', () => {
    const s = connected();
    const a = record({ cell_id: 'a', execution_count: 1, start_time: 10 });
    const b = record({ cell_id: 'b', execution_count: 2, start_time: 20 });
    const c = record({ cell_id: 'a', execution_count: 3, start_time: 30 });
    s.handleMessage({ type: 'cell', record: b, devices: [] });
    // page reload / reconnect to the same kernel: hello carries a, b, c
    s.handleMessage(hello({ cells: [a, b, c] }));
    expect(s.cells.map(e => e.record.execution_count)).toEqual([1, 2, 3]);
    s.handleMessage(hello({ cells: [a, b, c] }));
    expect(s.cells).toHaveLength(3);
    expect(s.epoch).toBe(0);
  });

  it('clearHistory forgets cells and asks the kernel', async () => {
    const sent: IRequestMessage[] = [];
    const s = connected(sent);
    s.handleMessage({ type: 'cell', record: record(), devices: [] });
    const done = s.clearHistory();
    expect(s.cells).toHaveLength(0);
    expect(sent[0].method).toBe('clear_history');
    s.handleMessage({
      type: 'reply',
      id: sent[0].id,
      ok: true,
      result: { cleared: 1 }
    });
    await done;
    // the same record can be recorded again after clearing
    s.handleMessage({ type: 'cell', record: record(), devices: [] });
    expect(s.cells).toHaveLength(1);
  });
});

describe('MemorySession: requests', () => {
  afterEach(() => jest.useRealTimers());

  it('sends typed requests with unique ids and resolves replies', async () => {
    const sent: IRequestMessage[] = [];
    const s = connected(sent);
    const p1 = s.request('get_devices', {});
    const p2 = s.request('set_settings', { sample_hz: 2 });
    expect(sent.map(m => m.method)).toEqual(['get_devices', 'set_settings']);
    expect(sent[0].type).toBe('request');
    expect(sent[0].id).not.toBe(sent[1].id);
    expect(sent[1].params).toEqual({ sample_hz: 2 });
    s.handleMessage({
      type: 'reply',
      id: sent[1].id,
      ok: true,
      result: { settings: { ...s.settings!, sample_hz: 2 } }
    });
    s.handleMessage({
      type: 'reply',
      id: sent[0].id,
      ok: true,
      result: { devices: [] }
    });
    await expect(p1).resolves.toEqual({ devices: [] });
    await expect(p2).resolves.toMatchObject({ settings: { sample_hz: 2 } });
    expect(s.settings?.sample_hz).toBe(2);
  });

  it('rejects on an error in_reply_to the request', async () => {
    const sent: IRequestMessage[] = [];
    const s = connected(sent);
    const p = s.request('get_insight', { model: 'nope' });
    s.handleMessage({
      type: 'error',
      code: 'invalid_params',
      message: 'no such model',
      in_reply_to: sent[0].id
    });
    await expect(p).rejects.toMatchObject({
      code: 'invalid_params',
      message: 'no such model'
    });
    expect(s.warnings).toHaveLength(0);
  });

  it('an error for no pending request becomes a warning', () => {
    const s = connected();
    s.handleMessage({
      type: 'error',
      code: 'internal',
      message: 'oops',
      in_reply_to: null
    });
    expect(s.warnings[0]).toContain('oops');
  });

  it('times out', async () => {
    jest.useFakeTimers();
    const s = connected();
    const p = s.request('get_report', {});
    jest.advanceTimersByTime(1001);
    await expect(p).rejects.toBeInstanceOf(RequestError);
    await expect(p).rejects.toMatchObject({ code: 'timeout' });
  });

  it('rejects when disconnected and on restart', async () => {
    const s = new MemorySession({ path: 'nb.ipynb' });
    await expect(s.request('get_report', {})).rejects.toMatchObject({
      code: 'disconnected'
    });
    const c = connected();
    const p = c.request('get_report', {});
    c.markRestart();
    await expect(p).rejects.toMatchObject({ code: 'restarted' });
  });

  it('a late reply after a timeout is ignored', async () => {
    jest.useFakeTimers();
    const sent: IRequestMessage[] = [];
    const s = connected(sent);
    const p = s.request('get_report', {});
    jest.advanceTimersByTime(2000);
    await expect(p).rejects.toMatchObject({ code: 'timeout' });
    expect(() =>
      s.handleMessage({ type: 'reply', id: sent[0].id, ok: true, result: {} })
    ).not.toThrow();
  });
});

describe('MemorySession: lifecycle', () => {
  it('emits statusChanged and clears signals on dispose', () => {
    const s = new MemorySession({ path: 'nb.ipynb' });
    const seen: ConnectionStatus[] = [];
    s.statusChanged.connect((_, st) => seen.push(st));
    s.setStatus('connecting');
    s.setStatus('connecting');
    s.setStatus('no-bridge', '%pip install vramscope');
    expect(seen).toEqual(['connecting', 'no-bridge']);
    s.dispose();
    expect(s.isDisposed).toBe(true);
    s.setStatus('connected');
    expect(seen).toHaveLength(2);
    expect(s.handleMessage(hello())).toBeNull();
  });

  it('revealCell delegates to the handler', () => {
    const revealed: string[] = [];
    const s = new MemorySession({
      path: 'nb.ipynb',
      revealCell: id => revealed.push(id)
    });
    s.revealCell('abc');
    expect(revealed).toEqual(['abc']);
  });
});
