/**
 * Pure logic of issue 22's panel: folding ended DataLoader workers, words (plurals, names
 * that say what they are, Markdown code spans), axis units following the units setting, the
 * answer line's busiest device and peaks, and the best action taken from advice.
 */
import { MessageLoop } from '@lumino/messaging';

import { MemorySession } from '../../src/model';
import { bestOf } from '../../src/optimize/best';
import { busiest, DevicePeaks, IGlance } from '../../src/panel/glance';
import {
  exitSummary,
  foldProcesses,
  rowFigures,
  rowLane
} from '../../src/processes/fold';
import type {
  IAdvice,
  IProcessInfo,
  ISuggestion,
  ProcessPoint
} from '../../src/protocol';
import { axisUnit } from '../../src/timeline/bytes';
import { codeSpans, countOf, labelled, plainText } from '../../src/words';
import { cpuAt300Then200, device, MIB, record } from './fixtures';

function worker(index: number, over: Partial<IProcessInfo> = {}): IProcessInfo {
  return {
    key: `vm:${100 + index}`,
    pid: 100 + index,
    ppid: 1,
    host: 'vm',
    remote: false,
    role: `DataLoader worker ${index % 2}`,
    kind: 'worker',
    index: index % 2,
    world: 2,
    cell: 3,
    started: 1000 + index,
    last_seen: 1001 + index,
    rss: (10 + index) * MIB,
    uss: index * MIB,
    pss: null,
    peak_rss: (20 + index) * MIB,
    peak_uss: 2 * index * MIB,
    devices: {},
    peak_devices: {},
    dropped: 0,
    ended: 1002 + index,
    exit: 'exit code 0',
    exit_code: 0,
    signal: null,
    oom: false,
    ...over
  };
}

describe('foldProcesses', () => {
  it('folds a cell’s ended workers into one row, keeping running ones and other cells', () => {
    const running = worker(0, { ended: null, exit: null, cell: 5, key: 'r' });
    const lone = worker(1, { cell: 4, key: 'lone' });
    const ended = [2, 3, 4, 5, 6, 7].map(i => worker(i));
    ended[5] = { ...ended[5], exit: 'killed by SIGKILL', oom: true };
    const rows = foldProcesses([running, lone, ...ended]);
    expect(rows.map(r => r.role)).toEqual([
      'DataLoader worker 0',
      'DataLoader worker 1',
      '6 ended workers of cell [3]'
    ]);
    expect(rows.map(r => r.key)).toEqual(['r', 'lone', 'ended-workers:3']);
    expect(rows[0].state).toBe('cell [5] · pid 100');
    expect(rows[1].state).toBe('cell [4] · exit code 0');
    expect(rows[2].state).toBe('5 exit code 0, 1 killed by SIGKILL');
    expect(rows[2].oom).toBe(true);
    expect(rows[2].ended).toBe(true);
    expect(rows[2].processes).toHaveLength(6);
    // the fold's figures: the most any one of them held
    expect(rowFigures(rows[2], 'peak')).toEqual({
      rss: 27 * MIB,
      uss: 14 * MIB,
      devices: {}
    });
    expect(rowFigures(rows[2], 'now').rss).toBe(17 * MIB);
  });

  it('leaves ranks, children and remote workers alone; one ended worker is its own row', () => {
    const rank = worker(1, { kind: 'rank', role: 'rank 1', key: 'k1' });
    const remote = [2, 3].map(i => worker(i, { remote: true }));
    const rows = foldProcesses([rank, ...remote]);
    expect(rows.map(r => r.key)).toEqual(['k1', 'vm:102', 'vm:103']);
  });

  it('draws the fold’s lane from all its points in time order', () => {
    const a = worker(2);
    const b = worker(3);
    const lanes: { [key: string]: ProcessPoint[] } = {
      [a.key]: [
        [10, 1, null, 0],
        [12, 2, null, 0]
      ],
      [b.key]: [[11, 5, null, 0]]
    };
    const [row] = foldProcesses([a, b]);
    expect(rowLane(row, k => lanes[k]).map(p => p[0])).toEqual([10, 11, 12]);
    expect(exitSummary([a, b])).toBe('exit code 0');
  });
});

describe('words', () => {
  it('counts with the right plural', () => {
    expect(countOf(1, 'tensor')).toBe('1 tensor');
    expect(countOf(0, 'tensor')).toBe('0 tensors');
    expect(countOf(22, 'ended worker')).toBe('22 ended workers');
    expect(countOf(2, 'process', 'processes')).toBe('2 processes');
  });

  it('never doubles a name that says what it is', () => {
    expect(labelled('model', 'model')).toEqual([{ code: 'model' }]);
    expect(labelled('model', 'trainer.model')).toEqual([
      { code: 'trainer.model' }
    ]);
    expect(labelled('loss', 'loss_fn')).toEqual([{ code: 'loss_fn' }]);
    expect(labelled('model', 'net')).toEqual(['model ', { code: 'net' }]);
    expect(labelled('optimizer', 'opt')).toEqual([
      'optimizer ',
      { code: 'opt' }
    ]);
  });

  it('turns Markdown code spans into code parts, never raw backticks', () => {
    expect(codeSpans('Checkpoint `model.layers` blocks')).toEqual([
      'Checkpoint ',
      { code: 'model.layers' },
      ' blocks'
    ]);
    expect(plainText('Swap `opt` for `Adafactor`')).toBe(
      'Swap opt for Adafactor'
    );
    // an unpaired backtick is not Markdown: the text stays as it is
    expect(codeSpans("it's a ` mark")).toEqual(["it's a ` mark"]);
  });
});

describe('axisUnit', () => {
  it('follows the units setting', () => {
    expect(axisUnit(3 * 1024 ** 3)).toEqual({ unit: 'GiB', scale: 1024 ** 3 });
    expect(axisUnit(3e9, 'decimal')).toEqual({ unit: 'GB', scale: 1e9 });
    expect(axisUnit(300e6, 'decimal')).toEqual({ unit: 'MB', scale: 1e6 });
    expect(axisUnit(1500, 'decimal')).toEqual({ unit: 'B', scale: 1 });
  });
});

describe('the answer line', () => {
  const g = (over: Partial<IGlance>): IGlance => ({
    id: 'cpu',
    kind: 'cpu',
    now: 0,
    peak: 0,
    total: null,
    ...over
  });

  it('shows the accelerator with the highest peak once one holds memory', () => {
    const cpu = g({ peak: 900 * MIB });
    const idle = g({ id: 'cuda:1', kind: 'cuda', peak: 0 });
    expect(busiest([cpu, idle])!.id).toBe('cpu');
    const used = g({ id: 'cuda:0', kind: 'cuda', peak: 10 * MIB });
    expect(busiest([cpu, idle, used])!.id).toBe('cuda:0');
    expect(busiest([])).toBeNull();
  });

  it('keeps each device’s peak over samples and cell records, reading each once', () => {
    const session = new MemorySession({ path: 'a.ipynb' });
    cpuAt300Then200(session);
    const peaks = new DevicePeaks();
    let [cpu] = peaks.read(session);
    expect(cpu).toMatchObject({ now: 200 * MIB, peak: 300 * MIB });
    // a cell whose peak (before + peak delta) passed every sample
    session.handleMessage({
      type: 'cell',
      record: record({
        devices: {
          cpu: {
            before_bytes: 200 * MIB,
            after_bytes: 200 * MIB,
            delta_bytes: 0,
            peak_delta_bytes: 250 * MIB
          }
        }
      }),
      devices: [device()]
    });
    [cpu] = peaks.read(session);
    expect(cpu.peak).toBe(450 * MIB);
    MessageLoop.flush();
    session.dispose();
  });

  it('names the best suggestion not yet applied, with its saving in the user’s units', () => {
    const s = (over: Partial<ISuggestion>): ISuggestion =>
      ({
        id: 'a',
        technique: 'checkpointing',
        title: 'Checkpoint `model.layers`',
        why: [],
        predicted: {
          activation_bytes_before: 26 * MIB,
          activation_bytes_after: 1.5 * MIB,
          saving_bytes: 24.5 * MIB,
          step_peak_saving_bytes: null,
          saving_fraction: 0.94
        },
        cost: { text: '', factor: null },
        kind: 'rewrite',
        code: '',
        undo_code: null,
        target_cell: null,
        ...over
      }) as ISuggestion;
    const advice = (suggestions: ISuggestion[]): IAdvice =>
      ({ suggestions, mistakes: [], outcomes: [], notes: [] }) as any;
    expect(bestOf(advice([s({})]), 'binary')).toEqual({
      id: 'a',
      title: 'Checkpoint model.layers',
      saving: '−24.5 MiB saved activations'
    });
    const applied = s({ applied: true });
    const swap = s({
      id: 'b',
      title: 'Adafactor for `opt`',
      predicted: {
        activation_bytes_before: null,
        activation_bytes_after: null,
        saving_bytes: 48e6,
        step_peak_saving_bytes: null,
        saving_fraction: null
      }
    });
    expect(bestOf(advice([applied, swap]), 'decimal')).toEqual({
      id: 'b',
      title: 'Adafactor for opt',
      saving: '−48.0 MB'
    });
    expect(bestOf(advice([]), 'binary')).toBeNull();
    expect(bestOf(null, 'binary')).toBeNull();
  });
});
