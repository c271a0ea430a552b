/**
 * The timeline's process lanes (issue 13): one lane per child process under the plot, named by
 * role, fed from the session's shared processes model, downsampled per lane with every peak
 * kept, on one scale; hidden with no child process, shown and hidden from the legend row.
 */
import { Widget } from '@lumino/widgets';

import {
  FakeSession,
  processesMessage,
  processInfo,
  sawtooth
} from '../../bench/timeline_update.fake';
import { acquireProcesses, releaseProcesses } from '../../src/processes/shared';
import type {
  IProcessesMessage,
  IProcessInfo,
  ProcessPoint
} from '../../src/protocol';
import { ProcessLanes } from '../../src/timeline/lanes';
import { TimelineView } from '../../src/timeline/view';
import type { IMemorySession } from '../../src/tokens';

const MiB = 2 ** 20;
const T0 = 1_700_000_000;

function proc(index: number, over: Partial<IProcessInfo> = {}): IProcessInfo {
  return processInfo({
    key: `vm:${10 + index}`,
    pid: 10 + index,
    role: `DataLoader worker ${index}`,
    kind: 'worker',
    index,
    world: 2,
    cell: 2,
    ...over
  });
}

function message(
  processes: IProcessInfo[],
  samples: { [key: string]: ProcessPoint[] },
  full = false
): IProcessesMessage {
  return processesMessage({ time: T0, full, processes, samples });
}

/** `n` points at 10 Hz from `from`: RSS a saw-tooth around `base` MiB, USS every 5th. */
function points(n: number, base: number, from = 0): ProcessPoint[] {
  const out: ProcessPoint[] = [];
  for (let i = from; i < from + n; i++) {
    const rss = (base + (i % 37)) * MiB;
    out.push([T0 + i / 10, rss, i % 5 === 0 ? rss / 4 : null, (i % 11) * MiB]);
  }
  return out;
}

const emit = (s: FakeSession, m: IProcessesMessage) =>
  s.messageReceived.emit(m);
const asSession = (s: FakeSession) => s as unknown as IMemorySession;

describe('ProcessLanes', () => {
  it('shares one processes model per session', () => {
    const session = new FakeSession();
    const a = acquireProcesses(asSession(session));
    const b = acquireProcesses(asSession(session));
    expect(b).toBe(a);
    releaseProcesses(a);
    expect(a.isDisposed).toBe(false);
    releaseProcesses(b);
    expect(a.isDisposed).toBe(true);
    expect(acquireProcesses(asSession(session))).not.toBe(a);
  });

  it('builds a lane per process, in the model order, with exact peaks per window', () => {
    const session = new FakeSession();
    const lanes = new ProcessLanes();
    lanes.setSession(asSession(session));
    const w0 = points(3000, 300);
    const w1 = points(3000, 500);
    emit(session, message([proc(1), proc(0)], { 'vm:10': w0, 'vm:11': w1 }));
    expect(lanes.count).toBe(2);
    const [t0, t1] = [T0 + 100, T0 + 200];
    const fig = lanes.build(t0, t1, 50, 'cpu');
    expect(fig.measure).toBe('host');
    expect(fig.lanes.map(l => l.role)).toEqual([
      'DataLoader worker 0',
      'DataLoader worker 1'
    ]);
    // ground truth: the largest RSS in the window (RSS drawn muted under USS)
    const truth = Math.max(
      ...w1.filter(p => p[0] >= t0 && p[0] <= t1).map(p => p[1])
    );
    expect(fig.lanes[1].peak).toBe(truth);
    expect(fig.max).toBe(truth);
    for (const lane of fig.lanes) {
      expect(lane.main.t.length).toBeLessThanOrEqual(2 * 50 + 8); // downsampled per lane
      expect(lane.muted).not.toBeNull();
    }
    // USS is the line: its newest value is worker 0's last USS reading
    const lastUss = w0.filter(p => p[2] !== null).pop()![2];
    expect(fig.lanes[0].now).toBe(lastUss);
    // only the lanes in sight get points; every lane its peak (the shared scale)
    const inSight = lanes.build(t0, t1, 50, 'cpu', [0, 1]);
    expect(inSight.lanes[0].main.t.length).toBe(fig.lanes[0].main.t.length);
    expect(inSight.lanes[1].main.t.length).toBe(0);
    expect(inSight.lanes[1].peak).toBe(truth);
    expect(inSight.max).toBe(truth);
    // accelerator view: the device bytes, no muted line
    const dev = lanes.build(t0, t1, 50, 'cuda');
    expect(dev.measure).toBe('device');
    expect(dev.lanes[0].muted).toBeNull();
    expect(dev.lanes[0].peak).toBe(10 * MiB);
    lanes.dispose();
  });

  it('appends incrementally, replaces on full, forgets removed processes, marks ended ones in place', () => {
    const session = new FakeSession();
    const lanes = new ProcessLanes();
    let changes = 0;
    lanes.changed.connect(() => changes++);
    lanes.setSession(asSession(session));
    emit(session, message([proc(0)], { 'vm:10': points(10, 100) }));
    emit(session, message([proc(0)], { 'vm:10': points(10, 100, 10) }));
    let lane = lanes.build(T0, T0 + 10, 500, 'cpu').lanes[0];
    expect(lane.muted!.t.length).toBe(20);
    const v0 = lanes.version;
    const ended = proc(0, {
      ended: T0 + 3,
      exit: 'killed by the OOM killer (SIGKILL)',
      oom: true
    });
    // the model lists running processes first; the lanes keep worker 0's place
    emit(session, message([proc(1), ended], { 'vm:11': points(5, 200) }));
    expect(lanes.version).toBeGreaterThan(v0);
    const fig = lanes.build(T0, T0 + 10, 500, 'cpu');
    expect(fig.lanes.map(l => l.exit)).toEqual([
      'killed by the OOM killer (SIGKILL)',
      null
    ]);
    expect(fig.lanes[0].oom).toBe(true);
    emit(session, message([proc(1)], { 'vm:11': points(3, 200) }, true));
    lane = lanes.build(T0, T0 + 10, 500, 'cpu').lanes[0];
    expect(lanes.count).toBe(1);
    expect(lane.role).toBe('DataLoader worker 1');
    expect(lane.muted!.t.length).toBe(3);
    expect(changes).toBeGreaterThanOrEqual(4);
    lanes.dispose();
  });
});

describe('ProcessLanes folding (issue 22)', () => {
  it("folds a cell's ended workers into one lane: every member's line, their peak", () => {
    const session = new FakeSession();
    const lanes = new ProcessLanes();
    lanes.setSession(asSession(session));
    // two epochs of a loader without persistent workers: workers 0-1, then 2-3, all ended
    const ended = (i: number) =>
      proc(i, { ended: T0 + 100, exit: 'exit code 0' });
    const samples = {
      'vm:10': points(300, 300),
      'vm:11': points(300, 350),
      'vm:12': points(300, 400, 300),
      'vm:13': points(300, 450, 300),
      'vm:14': points(600, 100)
    };
    const running = proc(4, { cell: 3, role: 'DataLoader worker 0' });
    emit(
      session,
      message([running, ended(0), ended(1), ended(2), ended(3)], samples)
    );
    expect(lanes.count).toBe(5); // the toggle still counts processes
    const fig = lanes.build(T0, T0 + 60, 50, 'cpu');
    expect(fig.lanes.map(l => [l.role, l.exit])).toEqual([
      ['DataLoader worker 0', null],
      ['4 ended workers of cell [2]', 'exit code 0']
    ]);
    const fold = fig.lanes[1];
    expect(fold.key).toBe('ended-workers:2');
    // ground truth: the largest RSS any of the four held in the window
    const all = ['vm:10', 'vm:11', 'vm:12', 'vm:13'].flatMap(
      k => samples[k as keyof typeof samples]
    );
    expect(fold.peak).toBe(Math.max(...all.map(p => p[1])));
    expect(fig.max).toBe(fold.peak);
    // each member's line, one after another: a gap after each, no line drawn across
    const gaps = Array.from(fold.main.v).filter(v => v !== v).length;
    expect(gaps).toBeGreaterThanOrEqual(4);
    const drawn = Array.from(fold.main.t).filter(
      (_, i) => fold.main.v[i] === fold.main.v[i]
    );
    expect(Math.min(...drawn)).toBe(T0); // the first epoch's workers ...
    expect(Math.max(...drawn)).toBeGreaterThan(T0 + 55); // ... and the second's
    expect(fold.muted).not.toBeNull();
    // the newest member's last USS is the lane's value now
    const lastUss = samples['vm:13'].filter(p => p[2] !== null).pop()![2];
    expect(fold.now).toBe(lastUss);
    lanes.dispose();
  });
});

describe('TimelineView process lanes', () => {
  let view: TimelineView;
  afterEach(() => view?.dispose());

  it('has no lanes and no toggle without child processes, then a named lane each', async () => {
    const session = new FakeSession();
    session.addSamples(
      sawtooth(600, { deviceId: 'cpu', t0: T0, hz: 10 }),
      false
    );
    view = new TimelineView({ windowSeconds: 60 });
    Widget.attach(view, document.body);
    view.setSession(asSession(session));
    await view.redraw();
    const node = view.node;
    const toggle = node.querySelector(
      '.vramscope-Timeline-lanesToggle'
    ) as HTMLButtonElement;
    const lanes = node.querySelector('.vramscope-TimelineLanes') as HTMLElement;
    expect(toggle.hidden).toBe(true);
    expect(lanes.hidden).toBe(true);

    emit(
      session,
      message([proc(0), proc(1)], {
        'vm:10': points(600, 300),
        'vm:11': points(600, 400)
      })
    );
    await view.redraw();
    expect(toggle.hidden).toBe(false);
    expect(toggle.textContent).toContain('2 processes');
    expect(toggle.getAttribute('aria-pressed')).toBe('true');
    expect(lanes.hidden).toBe(false);
    const names = [
      ...node.querySelectorAll('.vramscope-TimelineLanes-name')
    ].map(n => n.textContent);
    expect(names).toEqual(['DataLoader worker 0', 'DataLoader worker 1']);
    const rows = node.querySelectorAll<HTMLElement>(
      '.vramscope-TimelineLanes-lane'
    );
    // the window is the plot's (the last 60 s): worker 1's peak there, from its points
    const shown = points(600, 400).filter(p => p[0] >= T0 + 59.9 - 60);
    expect(Number(rows[1].dataset.peak)).toBe(
      Math.max(...shown.map(p => p[1]))
    );
    const canvas = node.querySelector(
      '.vramscope-TimelineLanes-lines'
    ) as HTMLCanvasElement;
    expect(canvas.dataset.lanes).toBe('2');

    toggle.click();
    await view.redraw();
    expect(lanes.hidden).toBe(true);
    expect(toggle.getAttribute('aria-pressed')).toBe('false');
    toggle.click();
    await view.redraw();
    expect(lanes.hidden).toBe(false);

    // the notebook no longer followed: no rows of its processes are kept, hidden or not
    view.setSession(null);
    await view.redraw();
    expect(toggle.hidden).toBe(true);
    expect(lanes.hidden).toBe(true);
    expect(node.querySelectorAll('.vramscope-TimelineLanes-lane')).toHaveLength(
      0
    );
    expect(canvas.dataset.lanes).toBeUndefined();
    // followed again: its lanes are built afresh from its processes (the kernel's next message)
    view.setSession(asSession(session));
    emit(
      session,
      message(
        [proc(0), proc(1)],
        { 'vm:10': points(600, 300), 'vm:11': points(600, 400) },
        true
      )
    );
    await view.redraw();
    expect(
      [...node.querySelectorAll('.vramscope-TimelineLanes-name')].map(
        n => n.textContent
      )
    ).toEqual(['DataLoader worker 0', 'DataLoader worker 1']);
    expect(canvas.dataset.lanes).toBe('2');
  });
});
