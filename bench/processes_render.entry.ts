/**
 * Browser side of bench/processes_render.mjs: the real ProcessesView and ProcessesModel fed
 * `processes` messages as a kernel with 64 ranks reporting at 10 Hz sends them (one message
 * every 0.5 s: 64 process infos and 5 new lane points each), lanes already full (3000 points,
 * 5 min at 10 Hz). Times one update: apply + render + the style/layout it causes.
 */
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import type {
  IProcessesMessage,
  IProcessInfo,
  KernelMessage,
  ProcessPoint
} from '../src/protocol';
import type { IMemorySession } from '../src/tokens';
import { LANE_LIMIT } from '../src/processes/model';
import { ProcessesView } from '../src/processes/view';
import { processesMessage, processInfo, stats } from './timeline_update.fake';

const MiB = 2 ** 20;

class FakeSession {
  status = 'connecting';
  messageReceived = new Signal<this, KernelMessage>(this);
  cellRecorded = new Signal<this, unknown>(this);
  cells = [];
  request(): Promise<unknown> {
    return Promise.reject(new Error('not in the bench'));
  }
}

function info(rank: number, t: number): IProcessInfo {
  return processInfo({
    key: `node${rank >> 3}:${1000 + rank}`,
    pid: 1000 + rank,
    host: `node${rank >> 3}`,
    remote: true,
    role: `rank ${rank} @ node${rank >> 3}`,
    kind: 'rank',
    index: rank,
    world: 64,
    cell: 4,
    last_seen: t,
    rss: (2000 + rank) * MiB,
    uss: 900 * MiB,
    pss: 1200 * MiB,
    peak_rss: (2100 + rank) * MiB,
    peak_uss: 950 * MiB,
    devices: {
      'cuda:0': {
        allocated: (30000 + rank) * MiB,
        reserved: 32000 * MiB,
        peak: 33000 * MiB
      }
    },
    peak_devices: { 'cuda:0': 33000 * MiB }
  });
}

function message(t0: number, points: number, ranks: number): IProcessesMessage {
  const samples: { [key: string]: ProcessPoint[] } = {};
  const processes: IProcessInfo[] = [];
  for (let r = 0; r < ranks; r++) {
    const p = info(r, t0 + points / 10);
    processes.push(p);
    const lane: ProcessPoint[] = [];
    for (let i = 0; i < points; i++) {
      const t = t0 + i / 10;
      const saw = ((i + r * 7) % 40) * 20 * MiB;
      lane.push([
        t,
        p.rss + saw,
        i % 5 === 0 ? p.uss! + saw / 2 : null,
        30000 * MiB
      ]);
    }
    samples[p.key] = lane;
  }
  return processesMessage({
    time: t0,
    processes,
    samples,
    remote: 'udp:0.0.0.0:29600'
  });
}

(window as any).vramscopeBench = async (o: {
  ranks: number;
  updates: number;
  width: number;
}) => {
  const session = new FakeSession();
  const view = new ProcessesView();
  view.node.style.width = `${o.width}px`;
  Widget.attach(view, document.body);
  view.setSession(session as unknown as IMemorySession);
  const fill = message(0, LANE_LIMIT, o.ranks);
  let t = performance.now();
  session.messageReceived.emit(fill);
  view.render();
  document.body.getBoundingClientRect();
  const firstMs = performance.now() - t;
  const times: number[] = [];
  const parts = {
    apply: [] as number[],
    render: [] as number[],
    layout: [] as number[]
  };
  let tk = LANE_LIMIT / 10;
  const frame = () =>
    new Promise(ok => requestAnimationFrame(() => setTimeout(ok, 0)));
  await frame(); // the observer reports which lanes are out of sight
  for (let u = 0; u < o.updates; u++) {
    await frame(); // updates come every 0.5 s: the page runs between them
    const msg = message(tk, 5, o.ranks);
    tk += 0.5;
    t = performance.now();
    session.messageReceived.emit(msg); // the model applies; the view asks for an update
    const t1 = performance.now();
    view.render(); // what the coalesced update request runs
    const t2 = performance.now();
    view.node.getBoundingClientRect(); // + the style and layout it causes
    times.push(performance.now() - t);
    parts.apply.push(t1 - t);
    parts.render.push(t2 - t1);
    parts.layout.push(performance.now() - t2);
  }
  const lanes = view.node.querySelectorAll<HTMLCanvasElement>(
    'canvas.vramscope-Processes-lane'
  );
  const drawn = Number(lanes[0]?.dataset.columns ?? 0);
  return {
    firstMs,
    update: stats(times),
    apply: stats(parts.apply).median,
    render: stats(parts.render).median,
    layout: stats(parts.layout).median,
    rows: lanes.length,
    drawnPerLane: drawn
  };
};
