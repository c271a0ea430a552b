/**
 * Issue 21: the collector's caps and replay refusals reach the panel. The `processes`
 * message's stats may carry `stale` (replayed reports refused) and `processes_dropped`
 * (reports of new processes turned away at the live cap), both validated, both shown.
 */
import * as fs from 'fs';
import * as path from 'path';

import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { ProcessesView } from '../../src/processes/view';
import type { IProcessesMessage, KernelMessage } from '../../src/protocol';
import type { ICellEntry, IMemorySession } from '../../src/tokens';
import { validateKernelMessage } from '../../src/validate';

/** The processes message a real kernel sent (test/fixtures), with these stats: one live
 * child, no finding. */
function withStats(stats: Record<string, unknown>): unknown {
  const captured = JSON.parse(
    fs.readFileSync(
      path.join(__dirname, '..', 'fixtures', 'kernel-messages.json'),
      'utf8'
    )
  ).processes;
  return {
    ...captured,
    processes: captured.processes.map((p: object) => ({ ...p, ended: null })),
    findings: [],
    stats: { received: 3, dropped: 0, refused: 1, malformed: 0, ...stats },
    remote: 'udp:10.0.0.5:29600'
  };
}

describe('processes stats: stale and processes_dropped', () => {
  it('are optional, and validated when present', () => {
    expect(typeof validateKernelMessage(withStats({}))).not.toBe('string');
    const both = withStats({ stale: 2, processes_dropped: 512 });
    expect(typeof validateKernelMessage(both)).not.toBe('string');
    const trimmed = withStats({ history_dropped: 4800 });
    expect(typeof validateKernelMessage(trimmed)).not.toBe('string');
    for (const bad of [-1, 1.5, '512', null]) {
      expect(
        validateKernelMessage(withStats({ history_dropped: bad }))
      ).toMatch(/stats\.history_dropped/);
      expect(
        validateKernelMessage(withStats({ processes_dropped: bad }))
      ).toMatch(/stats\.processes_dropped/);
      expect(validateKernelMessage(withStats({ stale: bad }))).toMatch(
        /stats\.stale/
      );
    }
  });

  it('are shown in the section summary', () => {
    const session = {
      status: 'connecting',
      messageReceived: new Signal<object, KernelMessage>({}),
      cellRecorded: new Signal<object, ICellEntry>({}),
      cells: [] as ICellEntry[]
    };
    const view = new ProcessesView();
    Widget.attach(view, document.body);
    view.setSession(session as unknown as IMemorySession);
    const msg = validateKernelMessage(
      withStats({ stale: 2, processes_dropped: 512, history_dropped: 12345 })
    );
    session.messageReceived.emit(msg as IProcessesMessage);
    view.render();
    const summary = view.node.querySelector('.vramscope-Processes-summary')!;
    expect(summary.textContent).toBe(
      '1 running · 0 ended · 3 refused · ' +
        '512 reports of processes over the cap dropped · ' +
        '12,345 oldest lane points cut (history cap) · ' +
        'remote ranks: udp:10.0.0.5:29600'
    );
    view.dispose();
  });
});
