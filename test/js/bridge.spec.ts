/**
 * KernelBridge against a fake kernel connection and session context: bootstrap, comms,
 * restarts (epochs, reconnect, stale work dropped), kernel changes, and the status for
 * non-Python kernels, a missing bridge and a protocol mismatch.
 */
import {
  BOOTSTRAP_CODE,
  INSTALL_LINE,
  KernelBridge
} from '../../src/model/bridge';
import { MemorySession } from '../../src/model/session';
import { hello, record, settings } from './fixtures';

import { FakeContext, FakeKernel, flush, IReply } from './fakekernel';

function setup(
  kernel: FakeKernel | null,
  options: Partial<KernelBridge.IOptions> = {}
): { context: FakeContext; session: MemorySession; bridge: KernelBridge } {
  const context = new FakeContext(kernel);
  const session = new MemorySession({ path: 'a.ipynb', now: () => 1700000100 });
  const bridge = new KernelBridge({
    sessionContext: context as any,
    session,
    getSettings: () => ({ sample_hz: 10 }),
    ...options
  });
  return { context, session, bridge };
}

/** The `get_samples` requests the bridge sent on the first control comm. */
const samplesAsked = (kernel: FakeKernel) =>
  kernel.open('control')[0].sent.filter(m => m.method === 'get_samples');

/** Run `body` on jest's fake timers (`Date.now` included), then on real ones again. */
async function withFakeTimers(body: () => void | Promise<void>): Promise<void> {
  jest.useFakeTimers();
  try {
    await body();
  } finally {
    jest.useRealTimers();
  }
}

/** Connect fully: bootstrap answered, comms opened, `hello` received. */
async function connected(kernel: FakeKernel, helloId = 'kernel-1') {
  await flush();
  const [stream] = kernel.open('stream');
  expect(stream).toBeDefined();
  stream.receive(hello({ session_id: helloId }));
  return stream;
}

/** A bridge on `kernel`, connected, once the work that follows `hello` has been sent. */
async function connectedBridge(kernel = new FakeKernel('k1')) {
  const parts = setup(kernel);
  await connected(kernel);
  await flush();
  return { kernel, ...parts };
}

/** `kernel`'s new process says hello: connected again, in the second epoch. */
function expectReconnected(
  kernel: FakeKernel,
  session: MemorySession,
  helloId: string
): void {
  kernel.open('stream')[0].receive(hello({ session_id: helloId }));
  expect(session.status).toBe('connected');
  expect(session.epoch).toBe(1);
}

describe('KernelBridge: connecting', () => {
  it('bootstraps, opens control then stream with the protocol version, and connects on hello', async () => {
    const kernel = new FakeKernel('k1');
    const { session, bridge } = setup(kernel);
    await flush();
    expect(kernel.executes.map(e => e.code)).toEqual([BOOTSTRAP_CODE]);
    expect(kernel.comms.map(c => c.channel)).toEqual(['control', 'stream']);
    expect(kernel.comms[0].targetName).toBe('vramscope');
    expect(kernel.comms[0].metadata).toEqual({ protocol_version: '1.1.0' });
    expect(session.status).toBe('connecting');
    kernel.comms[1].receive(hello());
    expect(session.status).toBe('connected');
    expect(session.kernel?.pid).toBe(4242);
    bridge.dispose();
  });

  it('asks for the kernel-kept samples after hello, once the kernel has been idle a moment', async () => {
    const kernel = new FakeKernel('k1');
    kernel.status = 'busy'; // e.g. "Run All" right after opening the notebook
    const { bridge } = await connectedBridge(kernel);
    const asked = () => samplesAsked(kernel);
    expect(asked()).toHaveLength(0);
    await withFakeTimers(() => {
      // "Run All": idle for an instant between cells does not count as quiet
      kernel.setStatus('idle');
      jest.advanceTimersByTime(KernelBridge.BACKFILL_QUIET_MS / 2);
      kernel.setStatus('busy');
      jest.advanceTimersByTime(KernelBridge.BACKFILL_QUIET_MS);
      expect(asked()).toHaveLength(0);
      kernel.setStatus('idle');
      jest.advanceTimersByTime(KernelBridge.BACKFILL_QUIET_MS + 1);
      expect(asked()).toHaveLength(1);
      kernel.setStatus('busy');
      kernel.setStatus('idle');
      jest.advanceTimersByTime(KernelBridge.BACKFILL_QUIET_MS + 1);
      expect(asked()).toHaveLength(1); // once per hello
    });
    bridge.dispose();
  });

  it('waits for the replies of execute requests already sent, even while the kernel says idle', async () => {
    const { kernel, bridge } = await connectedBridge();
    const asked = () => samplesAsked(kernel);
    await withFakeTimers(() => {
      // "Run All" sent two cells; their busy status has not arrived yet.
      const first = kernel.sendExecute();
      const second = kernel.sendExecute();
      jest.advanceTimersByTime(KernelBridge.BACKFILL_QUIET_MS * 3);
      expect(asked()).toHaveLength(0);
      first.reply();
      kernel.setStatus('idle'); // between the two cells
      jest.advanceTimersByTime(KernelBridge.BACKFILL_QUIET_MS * 3);
      expect(asked()).toHaveLength(0);
      second.reply();
      jest.advanceTimersByTime(KernelBridge.BACKFILL_QUIET_MS / 2);
      expect(asked()).toHaveLength(0); // the quiet period starts at the last reply
      jest.advanceTimersByTime(KernelBridge.BACKFILL_QUIET_MS);
      expect(asked()).toHaveLength(1);
    });
    bridge.dispose();
  });

  it('tells the session which cell runs, from its execute_input to its reply', async () => {
    const { kernel, session, bridge } = await connectedBridge();
    expect(session.runningCell).toBeNull(); // the silent bootstrap is no cell
    const seen: (string | null)[] = [];
    session.runningCellChanged.connect((_, c) => seen.push(c?.cellId ?? null));
    const first = kernel.sendExecute({
      code: '\n  for step in range(100):  \n    train(step)',
      cellId: 'cell-a'
    });
    const second = kernel.sendExecute({ code: 'x = 1', cellId: 'cell-b' });
    expect(session.runningCell).toBeNull(); // queued, not started
    first.input(7, '2026-11-23T09:30:00.250000Z');
    expect(session.runningCell).toEqual({
      msgId: first.msgId,
      cellId: 'cell-a',
      executionCount: 7,
      start: Date.parse('2026-11-23T09:30:00.250Z') / 1000,
      codeHead: 'for step in range(100):'
    });
    first.reply();
    expect(session.runningCell).toBeNull();
    second.input(8);
    expect(session.runningCell?.cellId).toBe('cell-b');
    kernel.setStatus('dead');
    expect(session.runningCell).toBeNull();
    expect(seen).toEqual(['cell-a', null, 'cell-b', null]);
    bridge.dispose();
  });

  it('a restart ends the running cell', async () => {
    const { kernel, context, session, bridge } = await connectedBridge();
    kernel.sendExecute({ code: 'while True: pass', cellId: 'c' }).input(1);
    expect(session.runningCell?.executionCount).toBe(1);
    await context.restart(kernel);
    expect(session.runningCell).toBeNull();
    bridge.dispose();
  });

  it('does not wait for ever for a reply that was lost', async () => {
    const { kernel, bridge } = await connectedBridge();
    const asked = () => samplesAsked(kernel);
    await withFakeTimers(() => {
      kernel.sendExecute(); // its reply never comes; the kernel stays idle
      kernel.setStatus('idle');
      jest.advanceTimersByTime(KernelBridge.LOST_REPLY_MS + 1);
      expect(asked()).toHaveLength(0);
      kernel.setStatus('idle');
      jest.advanceTimersByTime(KernelBridge.BACKFILL_QUIET_MS + 1);
      expect(asked()).toHaveLength(1);
    });
    bridge.dispose();
  });

  it('forgets unanswered execute requests when the kernel restarts', async () => {
    const { kernel, context, bridge } = await connectedBridge();
    kernel.sendExecute(); // never answered: the kernel is restarted under it
    await context.restart(kernel);
    await flush();
    const [stream] = kernel.open('stream');
    stream.receive(hello({ session_id: 'proc-2' }));
    await withFakeTimers(() => {
      kernel.setStatus('idle');
      jest.advanceTimersByTime(KernelBridge.BACKFILL_QUIET_MS + 1);
      expect(samplesAsked(kernel)).toHaveLength(1); // the new kernel's control comm
    });
    bridge.dispose();
  });

  it('sends no set_settings when the kernel already has the settings', async () => {
    const { kernel, bridge } = await connectedBridge();
    expect(
      kernel.open('control')[0].sent.filter(m => m.method !== 'get_samples')
    ).toEqual([]);
    bridge.dispose();
  });

  it('pushes differing settings on control after hello', async () => {
    const kernel = new FakeKernel('k1');
    const { session, bridge } = setup(kernel, {
      getSettings: () => ({ sample_hz: 2 })
    });
    await flush();
    kernel.open('stream')[0].receive(hello());
    await flush();
    const control = kernel.open('control')[0];
    control.sent = control.sent.filter(m => m.method !== 'get_samples');
    expect(control.sent).toHaveLength(1);
    expect(control.sent[0]).toMatchObject({
      type: 'request',
      method: 'set_settings',
      params: { sample_hz: 2 }
    });
    control.receive({
      type: 'reply',
      id: control.sent[0].id,
      ok: true,
      result: { settings: settings({ sample_hz: 2 }) }
    });
    await flush();
    expect(session.settings?.sample_hz).toBe(2);
    // Pushing again changes nothing: no second request.
    await bridge.pushSettings();
    expect(control.sent).toHaveLength(1);
    bridge.dispose();
  });

  it('a non-Python kernel is unsupported and nothing is executed', async () => {
    const kernel = new FakeKernel('k1', 'R');
    const { session, bridge } = setup(kernel);
    await flush();
    expect(session.status).toBe('unsupported-kernel');
    expect(session.statusMessage).toContain('R');
    expect(kernel.executes).toHaveLength(0);
    expect(kernel.comms).toHaveLength(0);
    bridge.dispose();
  });

  /** The session after a bootstrap that the kernel answers with `reply`. */
  async function afterBootstrap(reply: IReply): Promise<MemorySession> {
    const kernel = new FakeKernel('k1');
    kernel.autoReply = reply;
    const { session, bridge } = setup(kernel);
    await flush();
    expect(kernel.comms).toHaveLength(0);
    bridge.dispose();
    return session;
  }

  it('a missing bridge shows the %pip install line', async () => {
    const session = await afterBootstrap({
      status: 'error',
      ename: 'ModuleNotFoundError',
      evalue: "No module named 'vramscope'"
    });
    expect(session.status).toBe('no-bridge');
    expect(session.statusMessage).toContain(INSTALL_LINE);
    expect(INSTALL_LINE).toBe('%pip install vramscope');
  });

  it('another bootstrap error is an error status naming it', async () => {
    const session = await afterBootstrap({
      status: 'error',
      ename: 'ImportError',
      evalue: 'boom'
    });
    expect(session.status).toBe('error');
    expect(session.statusMessage).toContain('ImportError: boom');
  });

  it('a protocol mismatch in hello stops using the comms', async () => {
    const kernel = new FakeKernel('k1');
    const { session, bridge } = setup(kernel);
    await flush();
    const [stream] = kernel.open('stream');
    stream.receive(
      hello({ protocol_version: '2.0.0', bridge_version: '9.0.0' })
    );
    expect(session.status).toBe('protocol-mismatch');
    expect(session.statusMessage).toContain('2.0.0');
    expect(session.statusMessage).toContain('1.1.0');
    expect(kernel.open('stream')).toHaveLength(0);
    expect(kernel.open('control')).toHaveLength(0);
    await expect(session.request('get_devices', {})).rejects.toThrow(
      /not connected/
    );
    bridge.dispose();
  });

  it("the kernel's protocol_mismatch error (before hello) sets the status", async () => {
    const kernel = new FakeKernel('k1');
    const { session, bridge } = setup(kernel);
    await flush();
    const [stream] = kernel.open('stream');
    stream.receive({
      type: 'error',
      code: 'protocol_mismatch',
      message: 'front end 1.1.0, bridge 2.0.0',
      in_reply_to: null
    });
    stream.onClose({});
    expect(session.status).toBe('protocol-mismatch');
    bridge.dispose();
  });

  it('no kernel: idle with a hint', async () => {
    const { session, bridge } = setup(null);
    await flush();
    expect(session.status).toBe('idle');
    expect(session.statusMessage).toMatch(/No kernel/);
    bridge.dispose();
  });

  it('retries a bootstrap that gets no reply, then reports an error', async () => {
    await withFakeTimers(async () => {
      const kernel = new FakeKernel('k1');
      kernel.autoReply = null;
      const { session, bridge } = setup(kernel, { connectTimeoutMs: 100 });
      await flush();
      expect(kernel.executes).toHaveLength(1);
      for (let i = 0; i < KernelBridge.MAX_RETRIES; i++) {
        jest.advanceTimersByTime(100);
        await flush();
      }
      expect(kernel.executes).toHaveLength(1 + KernelBridge.MAX_RETRIES);
      jest.advanceTimersByTime(100);
      await flush();
      expect(session.status).toBe('error');
      // A late reply of an abandoned attempt changes nothing.
      kernel.executes[0].reply({ status: 'ok' });
      await flush();
      expect(session.status).toBe('error');
      expect(kernel.comms).toHaveLength(0);
      bridge.dispose();
    });
  });

  it('keeps waiting (no retry) while the kernel is busy running cells', async () => {
    await withFakeTimers(async () => {
      const kernel = new FakeKernel('k1');
      kernel.autoReply = null;
      const { session, bridge } = setup(kernel, { connectTimeoutMs: 100 });
      await flush();
      kernel.setStatus('busy');
      jest.advanceTimersByTime(1000);
      await flush();
      expect(kernel.executes).toHaveLength(1);
      expect(session.status).toBe('connecting');
      kernel.executes[0].reply({ status: 'ok' });
      await flush();
      expect(kernel.open('stream')).toHaveLength(1);
      bridge.dispose();
    });
  });
});

describe('KernelBridge: restarts and kernel changes', () => {
  it('a restart marks an epoch, keeps history and reconnects to the new process', async () => {
    const kernel = new FakeKernel('k1');
    const { context, session, bridge } = setup(kernel);
    const stream = await connected(kernel, 'proc-1');
    stream.receive({ type: 'cell', record: record(), devices: [] });
    expect(session.cells).toHaveLength(1);

    const statuses: string[] = [];
    session.statusChanged.connect((_, s) => statuses.push(s));
    await context.restart(kernel, async () => {
      // While the session context is still restarting, nothing is sent.
      await flush();
      expect(session.status).toBe('restarting');
      expect(kernel.executes).toHaveLength(1);
    });
    await flush();
    expect(session.epoch).toBe(1);
    expect(session.restarts).toEqual([1700000100]);
    expect(kernel.executes).toHaveLength(2);
    expect(kernel.executes[1].code).toBe(BOOTSTRAP_CODE);
    const [stream2] = kernel.open('stream');
    expect(stream2).not.toBe(stream);
    stream2.receive(hello({ session_id: 'proc-2' }));
    expect(session.status).toBe('connected');
    // One restart marked (not a second one for the new session_id).
    expect(session.epoch).toBe(1);
    expect(statuses).toEqual(['restarting', 'connecting', 'connected']);
    stream2.receive({
      type: 'cell',
      record: record({ cell_id: 'cell-b', start_time: 1700000200 }),
      devices: []
    });
    expect(session.cells.map(c => [c.record.cell_id, c.epoch])).toEqual([
      ['cell-a', 0],
      ['cell-b', 1]
    ]);
    bridge.dispose();
  });

  // kernel.restart() without the session context, and the server's auto-restart of a dead
  // kernel, come only as the kernel connection's own signals.
  it.each(['restarting', 'autorestarting'])(
    'a kernel %s status alone marks the restart and reconnects once the socket is back',
    async status => {
      const kernel = new FakeKernel('k1');
      const { session, bridge } = setup(kernel);
      await connected(kernel);
      kernel.setStatus(status);
      expect(session.status).toBe('restarting');
      kernel.connectionStatus = 'connecting';
      kernel.setStatus('unknown');
      kernel.connectionStatusChanged.emit('connecting');
      await flush();
      expect(kernel.executes).toHaveLength(1);
      kernel.setConnection('connected');
      await flush();
      expect(kernel.executes).toHaveLength(2);
      expectReconnected(kernel, session, 'proc-2');
      bridge.dispose();
    }
  );

  it('stale work from before a restart is ignored', async () => {
    const kernel = new FakeKernel('k1');
    kernel.autoReply = null;
    const { context, session, bridge } = setup(kernel);
    await flush();
    const oldBootstrap = kernel.executes[0];
    await context.restart(kernel);
    await flush();
    expect(kernel.executes).toHaveLength(2);
    // The old process's late bootstrap reply opens nothing.
    oldBootstrap.reply({ status: 'ok' });
    await flush();
    expect(kernel.comms).toHaveLength(0);
    expect(session.status).toBe('connecting');
    // Neither does a late error of the old attempt change the status.
    oldBootstrap.cancel();
    await flush();
    expect(session.status).toBe('connecting');
    kernel.executes[1].reply({ status: 'ok' });
    await flush();
    expect(kernel.open('stream')).toHaveLength(1);
    bridge.dispose();
  });

  it('messages on a comm of the previous kernel process are dropped', async () => {
    const kernel = new FakeKernel('k1');
    const { context, session, bridge } = setup(kernel);
    const oldStream = await connected(kernel, 'proc-1');
    await context.restart(kernel);
    await flush();
    oldStream.receive({ type: 'cell', record: record(), devices: [] });
    oldStream.receive(hello({ session_id: 'proc-1' }));
    expect(session.cells).toHaveLength(0);
    expect(session.status).toBe('connecting');
    bridge.dispose();
  });

  it('pending requests are rejected by a restart', async () => {
    const kernel = new FakeKernel('k1');
    const { context, session, bridge } = setup(kernel);
    await connected(kernel);
    const pending = session.request('get_devices', {});
    await context.restart(kernel);
    await expect(pending).rejects.toThrow(/restarted|closed/);
    bridge.dispose();
  });

  it('a dead kernel is an error; a new kernel reconnects with a new epoch', async () => {
    const kernel = new FakeKernel('k1');
    const { context, session, bridge } = setup(kernel);
    await connected(kernel);
    kernel.setStatus('dead');
    expect(session.status).toBe('error');
    expect(session.statusMessage).toMatch(/died/);
    const k2 = new FakeKernel('k2');
    context.changeKernel(k2);
    await flush();
    expect(k2.executes).toHaveLength(1);
    expectReconnected(k2, session, 'proc-k2');
    bridge.dispose();
  });

  it('a kernel change reconnects to the new kernel and ignores the old one', async () => {
    const k1 = new FakeKernel('k1');
    const { context, session, bridge } = setup(k1);
    const oldStream = await connected(k1, 'proc-1');
    const k2 = new FakeKernel('k2');
    k2.setConnection('connecting');
    context.changeKernel(k2);
    await flush();
    expect(session.epoch).toBe(1);
    expect(session.status).toBe('connecting');
    // Waits for the new kernel's connection before bootstrapping.
    expect(k2.executes).toHaveLength(0);
    k2.setConnection('connected');
    await flush();
    expect(k2.executes).toHaveLength(1);
    // The old kernel's signals and comms no longer matter.
    k1.setStatus('restarting');
    oldStream.receive({ type: 'cell', record: record(), devices: [] });
    expect(session.cells).toHaveLength(0);
    expectReconnected(k2, session, 'proc-k2');
    bridge.dispose();
  });

  it('a kernel shutdown (no kernel) goes idle and keeps history', async () => {
    const kernel = new FakeKernel('k1');
    const { context, session, bridge } = setup(kernel);
    const stream = await connected(kernel);
    stream.receive({ type: 'cell', record: record(), devices: [] });
    context.changeKernel(null);
    await flush();
    expect(session.status).toBe('idle');
    expect(session.cells).toHaveLength(1);
    bridge.dispose();
  });

  it('a page reload rehydrates the history from hello', async () => {
    const kernel = new FakeKernel('k1');
    const { session, bridge } = setup(kernel);
    await flush();
    kernel.open('stream')[0].receive(
      hello({
        cells: [record(), record({ cell_id: 'b', start_time: 1700000001 })]
      })
    );
    expect(session.status).toBe('connected');
    expect(session.cells).toHaveLength(2);
    expect(session.epoch).toBe(0);
    bridge.dispose();
  });

  it('dispose closes the comms and drops later messages', async () => {
    const kernel = new FakeKernel('k1');
    const { session, bridge } = setup(kernel);
    const stream = await connected(kernel);
    bridge.dispose();
    expect(stream.closed).toBe(true);
    expect(kernel.open('control')).toHaveLength(0);
    stream.receive({ type: 'cell', record: record(), devices: [] });
    expect(session.cells).toHaveLength(0);
  });
});
