/**
 * One node, every view: a selection bus on the document (DOM events, so the labextension's
 * bundle and the anywidget bundle, loaded separately, share it). Selecting an op in one view
 * publishes its key; every other open view highlights the same op, and each contributes what it
 * knows of it (value, gradient, time, memory, capture buffer, source line) to the one card the
 * selecting view shows.
 *
 * An op is the same op across views by its tape `seq` (tape, profile, debugger: one recording),
 * else by module path and op name (an FX graph or a capture of the same model).
 */
import { GNode } from './types';

export interface SelectionKey {
  seq: number | null; // the forward op's tape seq (a backward node: its forward op's)
  phase: 'forward' | 'backward' | null;
  module: string;
  op: string;
  name: string; // the node's label (an FX node's name)
  origin: string; // the publishing view's id: it ignores its own selection
}

export type Fact = [string, string];

const SELECT = 'tapelab-select';
const DESCRIBE = 'tapelab-describe';
let counter = 0;

/** A fresh id for a view on the bus. */
export function viewId(kind: string): string {
  return `${kind}-${++counter}-${Math.random().toString(36).slice(2, 7)}`;
}

/** The key of a node drawn by a view of kind `viewKind` ('tape' and 'debugger' know tape seqs). */
export function selectionKey(n: GNode, viewKind: string, origin: string): SelectionKey {
  const tapeSeqs = viewKind === 'tape' || viewKind === 'debugger';
  const seq = !tapeSeqs ? null : n.kind === 'backward' ? n.forward_seq : n.seq;
  return {
    seq: seq ?? null, phase: n.kind === 'backward' ? 'backward' : n.kind === 'forward' ? 'forward' : null,
    module: n.module || '', op: n.op || '', name: n.label || '', origin
  };
}

/** The node of `nodes` that `key` names, for a view of kind `viewKind`, or null. */
export function matchNode(nodes: GNode[], key: SelectionKey, viewKind: string): GNode | null {
  const tapeSeqs = viewKind === 'tape' || viewKind === 'debugger';
  if (key.seq !== null && tapeSeqs) {
    // seqs are global: a tape of the same recording has the op itself
    const back = key.phase === 'backward';
    const same = nodes.find(n => (back ? n.kind === 'backward' && n.forward_seq === key.seq : n.kind === 'forward' && n.seq === key.seq));
    if (same) {
      return same;
    }
  }
  const op = key.op.toLowerCase();
  const wantKind = key.phase === 'backward' ? 'backward' : 'forward';
  let byModule: GNode | null = null;
  let leaf: GNode | null = null; // last resort: a parameter of the module (FX graphs of prims)
  for (const n of nodes) {
    if (n.kind === 'leaf') {
      if (key.module && n.module === key.module) {
        leaf = leaf ?? n;
      }
      continue;
    }
    if (key.module && n.module === key.module) {
      if (n.op.toLowerCase() === op && n.kind === wantKind) {
        return n;
      }
      byModule = byModule ?? n;
    } else if (!key.module && !n.module && (n.label === key.name || n.op.toLowerCase() === op) && n.kind === wantKind) {
      return n;
    }
  }
  return byModule ?? leaf;
}

/** Tell every view that `key` was selected (null: the selection was cleared). */
export function publishSelection(key: SelectionKey | null, origin: string, doc: Document = document): void {
  doc.dispatchEvent(new CustomEvent(SELECT, { detail: { key, origin } }));
}

/**
 * Listen to selections made elsewhere: `onSelect(key)` (null: cleared), and `describe(key)`
 * returning what this view knows of the op. Returns the unsubscribe function.
 */
export function onSelection(origin: string, onSelect: (key: SelectionKey | null) => void,
  describe: (key: SelectionKey) => Fact[], doc: Document = document): () => void {
  const sel = (e: Event) => {
    const d = (e as CustomEvent).detail as { key: SelectionKey | null; origin: string };
    if (d.origin !== origin) {
      onSelect(d.key);
    }
  };
  const desc = (e: Event) => {
    const d = (e as CustomEvent).detail as { key: SelectionKey; facts: Fact[] };
    if (d.key.origin !== origin) {
      d.facts.push(...describe(d.key));
    }
  };
  doc.addEventListener(SELECT, sel);
  doc.addEventListener(DESCRIBE, desc);
  return () => {
    doc.removeEventListener(SELECT, sel);
    doc.removeEventListener(DESCRIBE, desc);
  };
}

/** What the other open views know of the op `key` names (events dispatch synchronously). */
export function describeSelection(key: SelectionKey, doc: Document = document): Fact[] {
  const detail = { key, facts: [] as Fact[] };
  doc.dispatchEvent(new CustomEvent(DESCRIBE, { detail }));
  const seen = new Set<string>();
  return detail.facts.filter(([k, v]) => {
    const id = k + '\u0000' + v;
    if (!v || seen.has(id)) {
      return false;
    }
    seen.add(id);
    return true;
  });
}
