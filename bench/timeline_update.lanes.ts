/**
 * Browser side of the process-lanes part of bench/timeline_update.mjs: the real TimelineView
 * with `ranks` processes reporting at 10 Hz (5 min of lane history each), against the same view
 * of a kernel with no child process (the lanes hidden: the A/A baseline), side by side in one
 * page. One live update = one kernel sample, and every 5th update a `processes` message with
 * 5 new points per rank (the kernel publishes every 0.5 s), as in a live run.
 */
import { Widget } from '@lumino/widgets';

import type {
  IProcessesMessage,
  IProcessInfo,
  ProcessPoint
} from '../src/protocol';
import { TimelineView } from '../src/timeline/view';
import {
  FakeSession,
  processesMessage,
  processInfo,
  sawtooth,
  stats
} from './timeline_update.fake';

const MiB = 2 ** 20;
const HZ = 10;

function rank(index: number, ranks: number, t: number): IProcessInfo {
  return processInfo({
    key: `node:${1000 + index}`,
    pid: 1000 + index,
    host: 'node',
    role: `rank ${index}`,
    kind: 'rank',
    index,
    world: ranks,
    cell: 7,
    started: t,
    last_seen: t,
    rss: 900 * MiB
  });
}

/** Rank `r`'s points `from..from+n` (10 Hz): a training step's rise and fall per second. */
function rankPoints(
  r: number,
  t0: number,
  from: number,
  n: number
): ProcessPoint[] {
  const out: ProcessPoint[] = [];
  for (let k = from; k < from + n; k++) {
    const step = k % 10;
    const dev = (2000 + 40 * r + (step < 6 ? step : 10 - step) * 300) * MiB;
    out.push([
      t0 + k / HZ,
      (900 + (k % 7)) * MiB,
      k % 5 ? null : 300 * MiB,
      dev
    ]);
  }
  return out;
}

function processes(
  ranks: number,
  t0: number,
  from: number,
  n: number,
  full: boolean
): IProcessesMessage {
  const samples: { [key: string]: ProcessPoint[] } = {};
  const infos: IProcessInfo[] = [];
  for (let r = 0; r < ranks; r++) {
    infos.push(rank(r, ranks, t0));
    samples[`node:${1000 + r}`] = rankPoints(r, t0, from, n);
  }
  return processesMessage({
    time: t0 + (from + n) / HZ,
    full,
    processes: infos,
    samples
  });
}

export async function lanesBench(options: {
  ranks: number;
  updates: number;
  width: number;
}): Promise<Record<string, unknown>> {
  const T0 = 1_700_100_000;
  const history = 3000; // 5 min at 10 Hz, per lane and for the kernel's samples
  const make = async (ranks: number) => {
    const session = new FakeSession(history + 10_000);
    session.addSamples(
      sawtooth(history, { t0: T0, hz: HZ, deviceId: 'cuda:0' }),
      false
    );
    session.processes = processes(ranks, T0, 0, history, true);
    const view = new TimelineView({ windowSeconds: 300 });
    view.node.style.width = `${options.width}px`;
    view.node.style.height = '400px';
    Widget.attach(view, document.body);
    view.setSession(session);
    await new Promise(r => setTimeout(r, 0)); // get_processes answered
    await view.redraw();
    return { session, view, ranks, next: history };
  };
  const withLanes = await make(options.ranks);
  const without = await make(0);
  const lanes = withLanes.view.node.querySelectorAll(
    '.vramscope-TimelineLanes-lane'
  ).length;

  type Side = typeof withLanes;
  const update = async (side: Side) => {
    const k = side.next++;
    const start = performance.now();
    side.session.addSamples(
      sawtooth(1, { t0: T0 + k / HZ, hz: HZ, deviceId: 'cuda:0' })
    );
    const message = side.ranks > 0 && k % 5 === 0;
    if (message) {
      side.session.messageReceived.emit(
        processes(side.ranks, T0, k - 4, 5, false)
      );
    }
    await side.view.redraw();
    void document.body.offsetHeight; // the style and layout it causes
    return { ms: performance.now() - start, message };
  };
  for (let i = 0; i < 10; i++) {
    await update(withLanes); // warm-up
    await update(without);
  }
  const on: number[] = [];
  const onMessage: number[] = [];
  const off: number[] = [];
  for (let i = 0; i < options.updates; i++) {
    // alternate which side goes first
    const sides = i % 2 ? [withLanes, without] : [without, withLanes];
    for (const side of sides) {
      const u = await update(side);
      if (side === without) {
        off.push(u.ms);
      } else {
        on.push(u.ms);
        if (u.message) {
          onMessage.push(u.ms);
        }
      }
    }
  }
  const drawnPerLane = Number(
    withLanes.view.node
      .querySelector('.vramscope-TimelineLanes-lane')
      ?.getAttribute('data-points') ?? 0
  );
  withLanes.view.dispose();
  without.view.dispose();
  return {
    ranks: options.ranks,
    lanes,
    drawnPerLane,
    on: stats(on),
    onMessage: stats(onMessage),
    off: stats(off)
  };
}
