/**
 * What the Optimize section can insert (a suggestion's cell, its undo cell, a mistake's fix),
 * where it goes, and the insertion itself through the notebook model. Nothing here runs code:
 * the new cell waits for the user to run it.
 */
import type { IAdvice, ICellRef, IMistake, ISuggestion } from '../protocol';

/** One cell the section can insert. */
export interface IInsertable {
  /** `<suggestion id>`, `<suggestion id>:undo`, `mistake:<mistake id>` or `FINDER_KEY`. */
  key: string;
  /** What the picker and the dialog call it. */
  label: string;
  code: string;
  /** The cell to insert below (null: the active cell). */
  target: ICellRef | null;
  /**
   * Why the target: "the training cell", "the cell it was found in"; '' where the target is
   * just some cell (the preview then names it: "cell [7]").
   */
  targetRole: string;
}

/** Key of the batch-size finder cell (`advice.finder_code`). */
export const FINDER_KEY = 'finder:batch_size';

/**
 * Every insertable cell of the advice: ranked suggestions first, then undo cells, fixes and
 * the batch-size finder.
 */
export function insertables(advice: IAdvice | null): IInsertable[] {
  if (!advice) {
    return [];
  }
  const out: IInsertable[] = [];
  for (const s of advice.suggestions) {
    if (s.applied) {
      continue; // applied: only its undo cell is offered
    }
    out.push({
      key: s.id,
      label: s.title,
      code: s.code,
      ...suggestionTarget(s, advice)
    });
  }
  for (const s of advice.suggestions) {
    if (s.undo_code) {
      out.push({
        key: `${s.id}:undo`,
        label: `Undo: ${s.title}`,
        code: s.undo_code,
        target: null,
        targetRole: ''
      });
    }
  }
  for (const m of advice.mistakes) {
    if (m.fix_code) {
      out.push({
        key: mistakeKey(m),
        label: `Fix: ${m.title}`,
        code: m.fix_code,
        ...mistakeTarget(m)
      });
    }
  }
  if (advice.finder_code) {
    out.push({
      key: FINDER_KEY,
      label: 'Find the largest batch size that fits',
      code: advice.finder_code,
      target: advice.training_cell,
      targetRole: advice.training_cell ? 'the training cell' : ''
    });
  }
  return out;
}

export function mistakeKey(m: IMistake): string {
  return `mistake:${m.id}`;
}

/** Whether `ref` names the training cell (by cell id, else by execution count). */
function isTrainingCell(ref: ICellRef, training: ICellRef | null): boolean {
  if (!training) {
    return false;
  }
  if (training.cell_id && ref.cell_id) {
    return training.cell_id === ref.cell_id;
  }
  return (
    training.execution_count !== null &&
    training.execution_count === ref.execution_count
  );
}

/**
 * Where a suggestion's cell goes: below the cell the kernel named (a rewrite or template
 * without one: below the training cell), else below the active cell. The role says "the
 * training cell" only when the target is the training cell; any other target is named by
 * its own label ("cell [7]", see `placement`).
 */
export function suggestionTarget(
  s: ISuggestion,
  advice: IAdvice
): { target: ICellRef | null; targetRole: string } {
  const target =
    s.target_cell ??
    (s.kind === 'rewrite' || s.kind === 'template'
      ? advice.training_cell
      : null);
  if (!target) {
    return { target: null, targetRole: '' };
  }
  return {
    target,
    targetRole: isTrainingCell(target, advice.training_cell)
      ? 'the training cell'
      : ''
  };
}

function mistakeTarget(m: IMistake): {
  target: ICellRef | null;
  targetRole: string;
} {
  if (m.cell_id === null && m.execution_count === null) {
    return { target: null, targetRole: '' };
  }
  return {
    target: { cell_id: m.cell_id, execution_count: m.execution_count },
    targetRole: 'the cell it was found in'
  };
}

/** The part of a JupyterLab `Notebook` that insertion uses (a `Notebook` satisfies it). */
export interface INotebookLike {
  readonly widgets: ReadonlyArray<{
    readonly model: {
      readonly id: string;
      readonly type: string;
    };
  }>;
  activeCellIndex: number;
  readonly model: {
    readonly sharedModel: {
      insertCell(
        index: number,
        cell: {
          cell_type: 'code';
          source: string;
          metadata?: Record<string, never>;
        }
      ): unknown;
    };
  } | null;
}

/** Index of the cell `ref` names: by cell id, else by its execution count; -1 if gone. */
export function findCell(notebook: INotebookLike, ref: ICellRef): number {
  const cells = notebook.widgets;
  if (ref.cell_id) {
    const i = cells.findIndex(c => c.model.id === ref.cell_id);
    if (i >= 0) {
      return i;
    }
  }
  if (ref.execution_count !== null) {
    return cells.findIndex(
      c =>
        c.model.type === 'code' &&
        (c.model as { executionCount?: number | null }).executionCount ===
          ref.execution_count
    );
  }
  return -1;
}

/** Where an insertable goes: below its target when that cell is still there, else below the active cell. */
export function placement(
  notebook: INotebookLike,
  item: IInsertable
): { index: number; below: string } {
  if (item.target) {
    const i = findCell(notebook, item.target);
    if (i >= 0) {
      const label = cellLabel(notebook, i);
      return {
        index: i + 1,
        below: item.targetRole
          ? `${item.targetRole} (${label})`
          : label.startsWith('[')
            ? `cell ${label}`
            : label
      };
    }
  }
  const active = notebook.activeCellIndex;
  if (active >= 0 && active < notebook.widgets.length) {
    return {
      index: active + 1,
      below: `the active cell (${cellLabel(notebook, active)})`
    };
  }
  return { index: notebook.widgets.length, below: 'the last cell' };
}

/**
 * Insert `item` as a new code cell at `placement(...)`, make it the active cell and return
 * its index (-1 when the notebook has no model). The cell is not run.
 */
export function insertCell(notebook: INotebookLike, item: IInsertable): number {
  const model = notebook.model;
  if (!model) {
    return -1;
  }
  const { index } = placement(notebook, item);
  model.sharedModel.insertCell(index, {
    cell_type: 'code',
    source: item.code,
    metadata: {}
  });
  notebook.activeCellIndex = index;
  return index;
}

function cellLabel(notebook: INotebookLike, index: number): string {
  const model = notebook.widgets[index].model as {
    executionCount?: number | null;
  };
  const count = model.executionCount;
  return typeof count === 'number' ? `[${count}]` : `cell ${index + 1}`;
}
