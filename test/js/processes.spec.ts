/**
 * The Processes section: the model follows `processes` messages (and asks for everything after
 * `hello`), keeps lanes bounded, and the view lists processes by role with current and peak
 * memory, ended ones with their exit reason, and the copy-on-access finding with its fixes.
 */
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { LANE_LIMIT, ProcessesModel } from '../../src/processes/model';
import { laneColumns } from '../../src/processes/lane';
import { ProcessesView } from '../../src/processes/view';
import type {
  IProcessesMessage,
  IProcessInfo,
  KernelMessage,
  ProcessPoint
} from '../../src/protocol';
import type { ICellEntry, IMemorySession } from '../../src/tokens';
import { validateKernelMessage } from '../../src/validate';

const MiB = 2 ** 20;

function proc(over: Partial<IProcessInfo>): IProcessInfo {
  return {
    key: 'vm:1',
    pid: 1,
    ppid: 100,
    host: 'vm',
    remote: false,
    role: 'child pid 1',
    kind: 'child',
    index: null,
    world: null,
    cell: 3,
    started: 1000,
    last_seen: 1001,
    rss: 100 * MiB,
    uss: 10 * MiB,
    pss: 50 * MiB,
    peak_rss: 120 * MiB,
    peak_uss: 12 * MiB,
    devices: {},
    peak_devices: {},
    dropped: 0,
    ended: null,
    exit: null,
    exit_code: null,
    signal: null,
    oom: false,
    ...over
  };
}

function message(over: Partial<IProcessesMessage>): IProcessesMessage {
  return {
    type: 'processes',
    time: 1002,
    full: false,
    processes: [],
    samples: {},
    findings: [],
    stats: { received: 1, dropped: 0, refused: 0, malformed: 0 },
    remote: null,
    ...over
  };
}

class FakeSession {
  status = 'connected';
  messageReceived = new Signal<this, KernelMessage>(this);
  cellRecorded = new Signal<this, ICellEntry>(this);
  cells: ICellEntry[] = [];
  full: IProcessesMessage = message({ full: true });
  asked = 0;
  request(method: string): Promise<unknown> {
    expect(method).toBe('get_processes');
    this.asked++;
    return Promise.resolve(this.full);
  }
}

const rank = (index: number, over: Partial<IProcessInfo> = {}) =>
  proc({
    key: `vm:${10 + index}`,
    pid: 10 + index,
    role: `rank ${index}`,
    kind: 'rank',
    index,
    world: 2,
    ...over
  });

const finding = {
  kind: 'copy_on_access' as const,
  cell: 3,
  workers: ['vm:21'],
  num_workers: 2,
  growth_bytes: 80 * MiB,
  projected_saving_bytes: 112 * MiB,
  dataset: {
    name: 'train_words',
    type: '__main__.Words',
    containers: [
      {
        name: 'train_words.items',
        type: 'list',
        length: 900000,
        bytes: 56 * MiB
      }
    ]
  },
  message:
    'Copy-on-access: 2 DataLoader worker(s) in cell [3] copy train_words',
  fixes: ['Store the samples in a numpy array', 'persistent_workers=True']
};

describe('ProcessesModel', () => {
  it('asks for everything when connected and after every hello', async () => {
    const session = new FakeSession();
    session.full = message({
      full: true,
      processes: [rank(0)],
      samples: { 'vm:10': [[1000, MiB, null, 0]] }
    });
    const model = new ProcessesModel(session as unknown as IMemorySession);
    await Promise.resolve();
    await Promise.resolve();
    expect(session.asked).toBe(1);
    expect(model.processes.map(p => p.role)).toEqual(['rank 0']);
    session.messageReceived.emit({ type: 'hello' } as unknown as KernelMessage);
    expect(session.asked).toBe(2);
    model.dispose();
  });

  it('appends lane points, bounded per lane, and drops lanes of forgotten processes', () => {
    const session = new FakeSession();
    session.status = 'connecting';
    const model = new ProcessesModel(session as unknown as IMemorySession);
    const points: ProcessPoint[] = [];
    for (let i = 0; i < LANE_LIMIT + 10; i++) {
      points.push([1000 + i / 10, i, null, 0]);
    }
    session.messageReceived.emit(
      message({ processes: [rank(0)], samples: { 'vm:10': points } })
    );
    expect(model.lane('vm:10').length).toBe(LANE_LIMIT);
    expect(model.lane('vm:10')[0][1]).toBe(10);
    session.messageReceived.emit(message({ processes: [rank(1)] }));
    expect(model.lane('vm:10').length).toBe(0);
    expect(session.asked).toBe(0);
    model.dispose();
  });

  it('merges an incremental message (changed_only) by key and lets forgotten keys go', () => {
    const session = new FakeSession();
    session.status = 'connecting';
    const model = new ProcessesModel(session as unknown as IMemorySession);
    const ended = proc({ key: 'a', pid: 5, ended: 1001, exit: 'exit code 0' });
    model.apply(message({ processes: [ended, rank(0), rank(1)] }));
    model.apply(
      message({
        changed_only: true,
        processes: [rank(0), { ...rank(1), rss: 7 * MiB }],
        samples: { 'vm:11': [[1003, 7 * MiB, null, 0]] },
        forgotten: []
      })
    );
    // the ended process was not sent again: it stays
    expect(model.processes.map(p => p.key)).toEqual(['vm:10', 'vm:11', 'a']);
    expect(model.processes[1].rss).toBe(7 * MiB);
    expect(model.lane('vm:11').length).toBe(1);
    model.apply(
      message({ changed_only: true, processes: [], forgotten: ['a', 'vm:11'] })
    );
    expect(model.processes.map(p => p.key)).toEqual(['vm:10']);
    expect(model.lane('vm:11').length).toBe(0);
    model.dispose();
  });

  it('orders running processes first, then by cell, kind and index', () => {
    const session = new FakeSession();
    session.status = 'connecting';
    const model = new ProcessesModel(session as unknown as IMemorySession);
    model.apply(
      message({
        processes: [
          proc({ key: 'a', pid: 5, ended: 1001, exit: 'exit code 0' }),
          rank(1),
          proc({
            key: 'w',
            pid: 7,
            role: 'DataLoader worker 0',
            kind: 'worker',
            index: 0
          }),
          rank(0)
        ]
      })
    );
    expect(model.processes.map(p => p.key)).toEqual([
      'vm:10',
      'vm:11',
      'w',
      'a'
    ]);
    model.dispose();
  });
});

describe('ProcessesView', () => {
  function shown(session: FakeSession): ProcessesView {
    const view = new ProcessesView();
    Widget.attach(view, document.body);
    view.setSession(session as unknown as IMemorySession);
    return view;
  }

  it('lists processes by role with now and peak per device, ended ones with their reason', () => {
    const session = new FakeSession();
    session.status = 'connecting';
    const view = shown(session);
    const msg = message({
      processes: [
        rank(0, { peak_rss: 200 * MiB }),
        rank(1, {
          peak_rss: 250 * MiB,
          devices: {
            'cuda:0': { allocated: 3 * MiB, reserved: 4 * MiB, peak: 5 * MiB }
          },
          peak_devices: { 'cuda:0': 5 * MiB }
        }),
        proc({
          key: 'vm:30',
          pid: 30,
          role: 'child pid 30',
          ended: 1003,
          exit: 'killed by the OOM killer (SIGKILL)',
          signal: 9,
          oom: true
        })
      ],
      samples: {
        'vm:10': [
          [1000, 100 * MiB, null, 0],
          [1001, 200 * MiB, 9, 0]
        ]
      },
      stats: { received: 9, dropped: 2, refused: 1, malformed: 0 }
    });
    expect(typeof validateKernelMessage(msg)).not.toBe('string');
    session.messageReceived.emit(msg);
    view.render();
    const rows = [...view.node.querySelectorAll('.vramscope-Processes-row')];
    expect(
      rows.map(r => r.querySelector('.vramscope-Processes-name')!.textContent)
    ).toEqual(['rank 0', 'rank 1', 'child pid 30']);
    const peak1 = rows[1].querySelector(
      '.vramscope-Processes-peak'
    )!.textContent;
    expect(peak1).toBe('250.0 MiBUSS 12.0 MiBcuda:0 5.0 MiB');
    expect(rows[1].querySelector('.vramscope-Processes-now')!.textContent).toBe(
      '100.0 MiBUSS 10.0 MiBcuda:0 3.0 MiB'
    );
    expect(rows[2].classList).toContain('vramscope-mod-ended');
    expect(rows[2].classList).toContain('vramscope-mod-oom');
    expect(rows[2].textContent).toContain('killed by the OOM killer (SIGKILL)');
    const lanes = [
      ...view.node.querySelectorAll('.vramscope-Processes-laneRow')
    ] as HTMLElement[];
    expect(lanes.map(r => r.dataset.key)).toEqual(['vm:10', 'vm:11', 'vm:30']);
    // rank 0's lane on the shared scale: RSS in the first and the last pixel column
    const canvas = lanes[0].querySelector('canvas') as HTMLCanvasElement;
    expect(canvas.dataset.columns).toBe('2');
    expect(Number(canvas.dataset.peak)).toBe(200 * MiB);
    expect(lanes[2].classList).toContain('vramscope-mod-ended');
    const summary = view.node.querySelector('.vramscope-Processes-summary')!;
    expect(summary.textContent).toBe(
      '2 running · 1 ended · 2 reports dropped · 1 refused'
    );
    view.dispose();
  });

  it('shows the copy-on-access finding with its fixes', () => {
    const session = new FakeSession();
    session.status = 'connecting';
    const view = shown(session);
    session.messageReceived.emit(
      message({
        processes: [
          proc({ key: 'vm:21', role: 'DataLoader worker 0', kind: 'worker' })
        ],
        findings: [finding]
      })
    );
    view.render();
    const box = view.node.querySelector('.vramscope-Processes-finding')!;
    expect(box.textContent).toContain('train_words');
    expect([...box.querySelectorAll('li')].map(li => li.textContent)).toEqual(
      finding.fixes
    );
    view.dispose();
  });

  it("shows each recent cell's child-process peaks and their spread (CellRecord.processes)", () => {
    const session = new FakeSession();
    session.status = 'connecting';
    const view = shown(session);
    session.messageReceived.emit(message({ processes: [rank(0), rank(1)] }));
    const peak = (role: string, rss: number) => ({
      role,
      peak_rss: rss,
      peak_uss: 0,
      peak_device: {}
    });
    const entry: ICellEntry = {
      epoch: 0,
      record: {
        cell_id: 'c5',
        execution_count: 5,
        start_time: 1000,
        duration: 3,
        ok: true,
        error_type: null,
        oom: false,
        code_head: 'mp.start_processes(train, nprocs=2, start_method="fork")',
        devices: {},
        processes: {
          'vm:11': peak('rank 1', 250 * MiB),
          'vm:10': peak('rank 0', 200 * MiB)
        }
      }
    };
    session.cells.push(entry);
    session.cellRecorded.emit(entry);
    view.render();
    const cells = view.node.querySelector('.vramscope-Processes-cells')!;
    expect(cells.textContent).toBe(
      'Peaks per cell[5]rank 0 200.0 MiB · rank 1 250.0 MiB (spread 50.0 MiB)'
    );
    view.dispose();
  });

  it('says how processes appear when there is none', () => {
    const view = shown(new FakeSession());
    view.render();
    expect(view.node.textContent).toContain('vramscope.attach()');
    view.dispose();
  });
});

describe('laneColumns', () => {
  it('keeps every column minimum and maximum, RSS and USS apart', () => {
    const points: ProcessPoint[] = [];
    for (let i = 0; i < 1000; i++) {
      points.push([i, i === 500 ? 10_000 : i % 7, i % 10 ? null : 3, 0]);
    }
    const range = { t0: 0, t1: 1000, max: 10_000, maxUss: 3 };
    const rss = laneColumns(points, range, 50, 1);
    expect(Math.max(...rss.hi)).toBe(10_000);
    expect(rss.lo[0]).toBe(0);
    expect(rss.hi[0]).toBe(6);
    const uss = laneColumns(points, range, 50, 2);
    expect([...uss.hi].every(v => v === 3)).toBe(true);
  });

  it('leaves columns without points empty (NaN)', () => {
    const points: ProcessPoint[] = [
      [0, 1, null, 0],
      [10, 2, null, 0]
    ];
    const { hi } = laneColumns(
      points,
      { t0: 0, t1: 10, max: 2, maxUss: 0 },
      10,
      1
    );
    expect(hi[0]).toBe(1);
    expect(hi[9]).toBe(2);
    expect(Number.isNaN(hi[5])).toBe(true);
  });
});
