import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { StateDB } from '@jupyterlab/statedb';

import { MemorySession } from '../../src/model/session';
import { tableItems } from '../../src/panel/celltable';
import { PaneState } from '../../src/panel/panestate';
import { IMemorySession } from '../../src/tokens';
import { panelWithSession } from './faketracker';
import { cpuAt300Then200, device, hello, MIB, record } from './fixtures';

const q = (sel: string) => document.querySelector(sel) as HTMLElement | null;
const qa = (sel: string) =>
  Array.from(document.querySelectorAll(sel)) as HTMLElement[];

afterEach(() => {
  document.body.innerHTML = '';
});

describe('MemoryPanel', () => {
  it('has the stable id, title and status attribute', () => {
    const { panel, session } = panelWithSession();
    expect(q('#vramscope-panel')).toBe(panel.node);
    expect(panel.title.caption).toBe('vramscope: memory');
    expect(q('.vramscope-Status')!.dataset.status).toBe('idle');
    session.setStatus(
      'no-bridge',
      'vramscope is not installed. Run: %pip install vramscope'
    );
    MessageLoop.flush();
    expect(q('.vramscope-Status')!.dataset.status).toBe('no-bridge');
    expect(q('.vramscope-Status-installLine')!.textContent).toBe(
      '%pip install vramscope'
    );
    panel.dispose();
  });

  it('shows devices, empty state, and cell rows with restart separators', () => {
    const { panel, session, revealed } = panelWithSession();
    expect(q('.vramscope-CellTable-empty')).not.toBeNull();
    session.handleMessage(
      hello({ devices: [device(), device({ id: 'cuda:0', kind: 'cuda' })] })
    );
    session.handleMessage({
      type: 'cell',
      record: record({ cell_id: 'a', execution_count: 1, start_time: 1 }),
      devices: [device()]
    });
    session.markRestart();
    session.handleMessage(hello({ session_id: 'k2' }));
    session.handleMessage({
      type: 'cell',
      record: record({
        cell_id: 'b',
        execution_count: 1,
        start_time: 2,
        ok: false,
        oom: true
      }),
      devices: [device()]
    });
    MessageLoop.flush();
    // Devices is closed at first (the answer line says the busiest device's figures)
    expect(qa('.vramscope-Device')).toHaveLength(0);
    panel.revealSection('Devices');
    MessageLoop.flush();
    expect(qa('.vramscope-Device').map(d => d.dataset.deviceId)).toEqual([
      'cpu'
    ]);
    const rows = qa('.vramscope-CellTable-row');
    // newest first by default
    expect(rows.map(r => r.dataset.cellId)).toEqual(['b', 'a']);
    expect(rows.map(r => r.dataset.executionCount)).toEqual(['1', '1']);
    expect(qa('.vramscope-CellTable-restart')).toHaveLength(1);
    expect(rows[0].querySelector('.vramscope-Badge')!.textContent).toBe('OOM');
    expect(
      rows[1].querySelector('.vramscope-CellTable-delta')!.textContent
    ).toBe('+64.0 MiB');
    rows[1].click();
    expect(revealed).toEqual(['a']);
    panel.dispose();
  });

  it('colours the change and the peak each by its own size', () => {
    const { panel, session } = panelWithSession();
    session.handleMessage({
      type: 'cell',
      record: record({
        devices: {
          cpu: {
            before_bytes: MIB,
            after_bytes: MIB + 4096,
            delta_bytes: 4096,
            peak_delta_bytes: 1500 * MIB
          }
        }
      }),
      devices: []
    });
    MessageLoop.flush();
    const delta = q('.vramscope-CellTable-delta')!;
    const peak = q('.vramscope-CellTable-peak')!;
    expect(delta.textContent).toBe('+4.0 KiB');
    expect(delta.classList.contains('vramscope-mod-small')).toBe(true);
    expect(peak.classList.contains('vramscope-mod-large')).toBe(true);
    panel.dispose();
  });

  it('sorts by a column when its header is clicked', () => {
    const { panel, session } = panelWithSession();
    const cell = (id: string, t: number, delta: number) => ({
      type: 'cell',
      record: record({
        cell_id: id,
        execution_count: t,
        start_time: t,
        devices: {
          cpu: {
            before_bytes: MIB,
            after_bytes: MIB + delta,
            delta_bytes: delta,
            peak_delta_bytes: Math.max(0, delta)
          }
        }
      }),
      devices: []
    });
    session.handleMessage(cell('x', 1, 5 * MIB));
    session.handleMessage(cell('y', 2, 50 * MIB));
    session.handleMessage(cell('z', 3, MIB));
    MessageLoop.flush();
    /** Click the header of `column`; the row order it leaves. */
    const clickSort = (column: string) => {
      (q(`[data-sort="${column}"]`) as HTMLButtonElement).click();
      MessageLoop.flush();
      return qa('.vramscope-CellTable-row').map(r => r.dataset.cellId);
    };
    expect(clickSort('delta')).toEqual(['y', 'x', 'z']);
    expect(clickSort('delta')).toEqual(['z', 'x', 'y']);
    panel.dispose();
  });

  it('addSection orders by rank and hands the session to session views', () => {
    const { tracker, panel, session } = panelWithSession();
    const seen: (IMemorySession | null)[] = [];
    const view = new (class extends Widget {
      setSession(s: IMemorySession | null) {
        seen.push(s);
      }
    })();
    const handle = panel.addSection('Timeline', view, { rank: 150 });
    // the accordion's order (its DOM order is its own)
    const titles = panel.sections.map(s => s.node.dataset.section);
    expect(titles).toEqual(['Devices', 'Timeline', 'Cells']);
    // each pane's header is the accordion's title, with the pane's toolbar in it
    expect(
      panel.accordion.titles.map(t => [
        t.dataset.section,
        t.getAttribute('aria-expanded')
      ])
    ).toEqual([
      ['Devices', 'false'],
      ['Timeline', 'true'],
      ['Cells', 'true']
    ]);
    expect(
      q(
        '.vramscope-Section-toggle[data-section="Cells"] .jp-AccordionPanel-toolbar [data-jp-item-name="clear"]'
      )
    ).not.toBeNull();
    expect(seen).toEqual([session]);
    tracker.setActive(null);
    expect(seen).toEqual([session, null]);
    handle.dispose();
    expect(panel.sections.map(s => s.node.dataset.section)).toEqual([
      'Devices',
      'Cells'
    ]);
    panel.dispose();
  });
});

describe('the panes and the answer line', () => {
  it('remembers which panes the user opened and closed, in the state database', async () => {
    const state = new StateDB();
    const first = panelWithSession('a.ipynb', new PaneState({ state }));
    const toggle = (title: string) =>
      q(`.vramscope-Section-toggle[data-section="${title}"]`)!;
    toggle('Devices').click(); // open
    toggle('Cells').click(); // close
    await Promise.resolve();
    expect(await state.fetch(PaneState.KEY)).toEqual({
      expanded: { Devices: true, Cells: false }
    });
    first.panel.dispose();
    document.body.innerHTML = '';
    const second = panelWithSession('a.ipynb', new PaneState({ state }));
    // restored once the state database answered
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(toggle('Devices').getAttribute('aria-expanded')).toBe('true');
    expect(toggle('Cells').getAttribute('aria-expanded')).toBe('false');
    second.panel.dispose();
  });

  it('answers first: the busiest device now and at peak, and how to get advice', () => {
    const { panel, session } = panelWithSession();
    cpuAt300Then200(session);
    MessageLoop.flush();
    const memory = q('.vramscope-Answer-memory')!;
    expect(memory.dataset.device).toBe('cpu');
    expect(memory.textContent).toBe('cpu 200.0 MiB now · peak 300.0 MiB');
    // no advice source (no Optimize plugin): no action line
    expect(q('.vramscope-Answer-action')!.hidden).toBe(true);
    panel.dispose();
  });

  it('rebuilds the answer line only when what it shows changes', () => {
    const { panel, session } = panelWithSession();
    cpuAt300Then200(session);
    MessageLoop.flush();
    const memory = q('.vramscope-Answer-memory')!;
    const shown = memory.querySelector('.vramscope-Answer-now');
    const sample = (t: number, used: number) =>
      session.handleMessage({
        type: 'samples',
        samples: [{ t, d: { cpu: { used } } }],
        dropped: 0
      });
    // an idle kernel: a few KiB more, the same text; the same nodes are kept
    sample(3, 200 * MIB + 8 * 1024);
    MessageLoop.flush();
    expect(memory.querySelector('.vramscope-Answer-now')).toBe(shown);
    expect(memory.textContent).toBe('cpu 200.0 MiB now · peak 300.0 MiB');
    // a change the text shows
    sample(4, 250 * MIB);
    MessageLoop.flush();
    expect(memory.querySelector('.vramscope-Answer-now')).not.toBe(shown);
    expect(memory.textContent).toBe('cpu 250.0 MiB now · peak 300.0 MiB');
    panel.dispose();
  });
});

describe('hidden panes', () => {
  it('follow a change of notebook at once; new records wait until the pane opens', () => {
    const { panel, session, tracker } = panelWithSession();
    const toggle = q('.vramscope-Section-toggle[data-section="Devices"]')!;
    const empty = () => q('.vramscope-Devices-empty')?.textContent ?? null;
    session.handleMessage(hello({ devices: [device()] }));
    toggle.click(); // open
    MessageLoop.flush();
    expect(qa('.vramscope-Device').map(d => d.dataset.deviceId)).toEqual([
      'cpu'
    ]);
    toggle.click(); // closed again, then the notebook is closed
    MessageLoop.flush();
    tracker.setActive(null);
    MessageLoop.flush();
    expect(toggle.getAttribute('aria-expanded')).toBe('false');
    expect(qa('.vramscope-Device')).toHaveLength(0);
    expect(empty()).toBe('No devices reported yet.');
    // another notebook: shown as it is when followed, its later records once opened
    const other = new MemorySession({ path: 'b.ipynb', revealCell: () => {} });
    tracker.setActive(other);
    MessageLoop.flush();
    other.handleMessage(hello({ devices: [device()] }));
    MessageLoop.flush();
    expect(qa('.vramscope-Device')).toHaveLength(0);
    expect(empty()).toBe('No devices reported yet.');
    toggle.click();
    MessageLoop.flush();
    expect(qa('.vramscope-Device')).toHaveLength(1);
    panel.dispose();
    other.dispose();
  });
});

describe('tableItems', () => {
  it('adds a trailing restart marker when the kernel restarted after the last cell', () => {
    const e = (epoch: number, t: number) => ({
      record: record({ start_time: t }),
      epoch
    });
    const items = tableItems([e(0, 1), e(0, 2)], 1, 'order', true, '');
    expect(items.map(i => i.kind)).toEqual(['cell', 'cell', 'restart']);
    const desc = tableItems([e(0, 1), e(1, 2)], 1, 'order', false, '');
    expect(desc.map(i => i.kind)).toEqual(['cell', 'restart', 'cell']);
  });
});
