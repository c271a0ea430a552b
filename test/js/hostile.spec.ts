/**
 * Hostile strings in the panel: cell sources, module paths, holder and model names, warnings
 * and notices holding HTML, `</script>`, a bidi override, newlines, 100,000 characters and
 * U+FFFD (what the kernel sends for a lone surrogate) are shown as the same text, never as
 * markup, through the real session (validation included) and the real views.
 */
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { InsightView } from '../../src/insight/view';
import { bandHover } from '../../src/timeline/figure';
import { MemorySession } from '../../src/model/session';
import { panelWithSession } from './faketracker';
import { hello, insight, MIB, record } from './fixtures';

const HTML = '<img src=x onerror="window.__pwned=1">';
const SCRIPT = '</script><script>window.__pwned=1</script>';
const BIDI = 'evil\u202etxt-exe';
const NEWLINE = 'a\n__import__("os")';
const LONG = 'L'.repeat(100_000);
const REPLACED = '\ufffdx';
const HOSTILE = [HTML, SCRIPT, BIDI, NEWLINE, LONG, REPLACED];

/** No element came from a user string, and nothing ran. */
function expectNoMarkup(): void {
  expect(document.querySelectorAll('img, script, iframe, object')).toHaveLength(
    0
  );
  expect((window as any).__pwned).toBeUndefined();
}

afterEach(() => {
  document.body.innerHTML = '';
});

describe('hostile strings in the panel', () => {
  it('cell sources, warnings and notices are text', () => {
    const { panel, session } = panelWithSession(`${HTML}${BIDI}.ipynb`);
    const cells = HOSTILE.map((head, i) =>
      record({
        cell_id: `c${i}`,
        execution_count: i + 1,
        code_head: head.slice(0, 120),
        error_type: i === 1 ? SCRIPT : null,
        ok: i !== 1
      })
    );
    expect(
      session.handleMessage(hello({ cells, warnings: [HTML, SCRIPT] }))
    ).not.toBeNull();
    expect(
      session.handleMessage({ type: 'notice', level: 'warning', message: HTML })
    ).not.toBeNull();
    MessageLoop.flush();
    expectNoMarkup();
    const text = document.body.textContent ?? '';
    for (const head of HOSTILE) {
      expect(text).toContain(head.slice(0, 120));
    }
    expect(text).toContain(HTML); // the warning and the notebook path
    panel.dispose();
  });

  it('module paths, holder and model names are text', () => {
    const session = new MemorySession({ path: 'a.ipynb' });
    const view = new InsightView();
    Widget.attach(view, document.body);
    view.setSession(session);
    session.handleMessage(hello());
    const layers = HOSTILE.map((path, i) => ({
      path,
      type: SCRIPT,
      saved_bytes: (i + 1) * MIB,
      peak_saved_bytes: (i + 1) * MIB,
      output_shape: [8, 64],
      param_bytes: MIB,
      grad_bytes: 0
    }));
    const holders = HOSTILE.map((name, i) => ({
      name,
      kind: 'tensor',
      bytes: (i + 2) * MIB,
      explanation: `${HTML} keeps ${name.slice(0, 20)}`,
      fix: `del ${NEWLINE}`
    }));
    const models = HOSTILE.map((name, i) => ({
      name,
      type: HTML,
      param_bytes: (10 - i) * MIB
    }));
    const msg = {
      type: 'insight',
      insight: insight({ model: HOSTILE[0], models, layers, holders })
    };
    expect(session.handleMessage(msg)).not.toBeNull();
    MessageLoop.flush();
    expectNoMarkup();
    const text = view.node.textContent ?? '';
    for (const s of HOSTILE) {
      expect(text).toContain(s);
    }
    const options = Array.from(
      view.node.querySelectorAll('.vramscope-Insight-model option')
    ).map(o => (o as HTMLOptionElement).value);
    expect(options).toEqual(HOSTILE);
    view.dispose();
  });

  it('the timeline hover (plotly HTML subset) escapes the source and error', () => {
    for (const head of HOSTILE) {
      const text = bandHover(
        {
          cellId: 'c',
          executionCount: 1,
          start: 0,
          end: 1,
          label: '[1]',
          codeHead: head,
          ok: false,
          oom: false,
          errorType: SCRIPT,
          deltaBytes: MIB,
          peakDeltaBytes: MIB,
          epoch: 0
        },
        HTML
      );
      const ours = text.replace(/<\/?b>|<br>/g, '');
      expect(ours).not.toMatch(/[<>]/);
      expect(ours).toContain(
        head.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
      );
    }
  });
});
