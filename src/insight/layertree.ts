/**
 * Saved activations as a tree of module paths: each block's total (its own saved bytes plus
 * its submodules'), the model's own output (path "") and what was saved outside the model
 * (`<other>`: the loss and code around the forward) as named rows. No DOM.
 */
import { formatBytes } from '../format';
import type { ILayerInfo } from '../protocol';

/** What the kernel names the saved tensors outside any module of the model. */
export const OUTSIDE_PATH = '<other>';

export interface ILayerNode {
  /** The full module path ("" the model itself, `<other>` outside it). */
  path: string;
  /** The last path segment (or the row's name for the model and outside rows). */
  name: string;
  depth: number;
  /** The kernel's row for exactly this path (null: a prefix with no module row). */
  layer: ILayerInfo | null;
  /** Own plus every descendant's live saved bytes. */
  total: number;
  peak: number;
  /** `total` split by dtype (only the rows that report it). */
  byDtype: { [dtype: string]: number };
  /** This block or one inside it starts a checkpointed region. */
  checkpointed: boolean;
  children: ILayerNode[];
}

/** The display name of a root-level special row. */
export function specialName(layer: ILayerInfo): string | null {
  if (layer.path === '') {
    // No shape: the output is not one tensor (a Hugging Face ModelOutput, a tuple), and the
    // row holds what the model's own forward saved, a loss computed in it included.
    return layer.output_shape
      ? `model output [${layer.output_shape.join(', ')}]`
      : "model's own forward (outputs, a loss computed in it)";
  }
  if (layer.path === OUTSIDE_PATH) {
    return 'loss and code outside the model';
  }
  return null;
}

/**
 * The tree of `layers` under one root per top-level name, the model's own row and the
 * outside row; children sorted by total, then peak, then path.
 */
export function buildLayerTree(
  layers: ReadonlyArray<ILayerInfo>
): ILayerNode[] {
  const byPath = new Map<string, ILayerNode>();
  const roots: ILayerNode[] = [];
  const node = (path: string, depth: number): ILayerNode => {
    let n = byPath.get(path);
    if (!n) {
      const dot = path.lastIndexOf('.');
      n = {
        path,
        name: dot >= 0 ? path.slice(dot + 1) : path,
        depth,
        layer: null,
        total: 0,
        peak: 0,
        byDtype: {},
        checkpointed: false,
        children: []
      };
      byPath.set(path, n);
      if (dot >= 0) {
        node(path.slice(0, dot), depth - 1).children.push(n);
      } else {
        roots.push(n);
      }
    }
    return n;
  };
  for (const layer of layers) {
    const special = specialName(layer);
    const n = special
      ? node(layer.path, 0)
      : node(layer.path, layer.path.split('.').length - 1);
    if (special) {
      n.name = special;
    }
    n.layer = layer;
  }
  const sum = (n: ILayerNode): void => {
    const own = n.layer;
    n.total = own?.saved_bytes ?? 0;
    n.peak = own?.peak_saved_bytes ?? 0;
    n.byDtype = { ...(own?.saved_by_dtype ?? {}) };
    n.checkpointed = !!own?.checkpointed;
    for (const c of n.children) {
      sum(c);
      n.total += c.total;
      n.peak += c.peak;
      n.checkpointed = n.checkpointed || c.checkpointed;
      for (const [dtype, bytes] of Object.entries(c.byDtype)) {
        n.byDtype[dtype] = (n.byDtype[dtype] ?? 0) + bytes;
      }
    }
    n.children.sort(compareNodes);
  };
  roots.forEach(sum);
  return roots.sort(compareNodes);
}

/** Exact byte counts with thousands separators ("1,234,567"); one formatter for every row. */
export const formatCount = new Intl.NumberFormat('en-US').format;

/**
 * Module paths in natural order ("h.2" before "h.10"), with one collator: `localeCompare`
 * on every tie cost ~10 ms for a model of 1,000 equal rows (nothing saved after backward).
 */
export const comparePaths = new Intl.Collator('en', { numeric: true }).compare;

function compareNodes(a: ILayerNode, b: ILayerNode): number {
  return b.total - a.total || b.peak - a.peak || comparePaths(a.path, b.path);
}

/**
 * The rows shown, depth first: a node's children when it is expanded; with a filter, the
 * nodes whose path (or name) matches and their ancestors (expanded).
 */
export function visibleNodes(
  roots: ReadonlyArray<ILayerNode>,
  expanded: ReadonlySet<string>,
  filter: string
): ILayerNode[] {
  const q = filter.trim().toLowerCase();
  const matches = (n: ILayerNode): boolean =>
    n.path.toLowerCase().includes(q) || n.name.toLowerCase().includes(q);
  const out: ILayerNode[] = [];
  const visit = (n: ILayerNode): boolean => {
    if (q) {
      const at = out.length;
      out.push(n);
      let any = false;
      for (const c of n.children) {
        any = visit(c) || any;
      }
      if (!any && !matches(n)) {
        out.length = at; // neither it nor anything below it matches
        return false;
      }
      return true;
    }
    out.push(n);
    if (expanded.has(n.path)) {
      n.children.forEach(visit);
    }
    return true;
  };
  roots.forEach(visit);
  return out;
}

/**
 * The paths expanded at first: the nodes above `depth`, so that a transformer's blocks show
 * with their totals (`transformer` > `h` > `h.0`, `h.1`, ...) and their insides are one click
 * away.
 */
export function defaultExpanded(
  roots: ReadonlyArray<ILayerNode>,
  depth = 2
): Set<string> {
  const out = new Set<string>();
  const visit = (n: ILayerNode, d: number) => {
    if (d < depth && n.children.length) {
      out.add(n.path);
      n.children.forEach(c => visit(c, d + 1));
    }
  };
  roots.forEach(r => visit(r, 0));
  return out;
}

/** Short dtype names: float32 -> f32, bfloat16 -> bf16, float16 -> f16. */
export function shortDtype(dtype: string): string {
  return dtype
    .replace(/^bfloat/, 'bf')
    .replace(/^float/, 'f')
    .replace(/^int/, 'i');
}

/** The dtypes of a node's saved bytes, largest first ("bf16 · f32"), or ''. */
export function dtypeTag(n: ILayerNode): string {
  return Object.entries(n.byDtype)
    .filter(([, b]) => b > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([d]) => shortDtype(d))
    .join(' · ');
}

/** The hover text of a tree row. */
export function nodeTooltip(n: ILayerNode): string {
  const lines = [
    `${n.path || '(model)'}${n.layer?.type ? ` (${n.layer.type})` : ''}`,
    `saved for backward: ${formatBytes(n.total)} = ${formatCount(n.total)} bytes` +
      (n.children.length ? ' with everything inside it' : '') +
      ` (peak ${formatBytes(n.peak)})`
  ];
  const dtypes = Object.entries(n.byDtype).filter(([, b]) => b > 0);
  if (dtypes.length) {
    lines.push(
      'by dtype: ' + dtypes.map(([d, b]) => `${d} ${formatBytes(b)}`).join(', ')
    );
  }
  if (n.checkpointed) {
    lines.push(
      n.layer?.checkpointed
        ? 'checkpointed: its activations are recomputed in backward'
        : 'contains checkpointed blocks'
    );
  }
  if (n.path === OUTSIDE_PATH) {
    lines.push(
      'saved by code outside the model: the loss (and its float32 upcast of the logits)'
    );
  }
  return lines.join('\n');
}
