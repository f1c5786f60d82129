/**
 * The FX graph view: one pane per graph (two for a diff), each the tape view's GraphView beside
 * the graph's generated code. Hovering a node highlights the line that defines it (in every
 * pane), hovering a line highlights its nodes. Diff panes colour nodes and lines by status
 * (added, removed, changed), as widgets/fx_adapter.py's diff_graphs sets them.
 *
 * The graph is the view-model schema (types.ts) plus FX fields on nodes: name, opcode, target,
 * args, line (0-based line of the code that defines it), diff. Strings go into the DOM through
 * textContent only.
 */
import { GraphStore, Unit } from './renderer/store';
import { GraphView } from './renderer/view';
import { el, fmtShape } from './renderer/format';
import { Graph, GNode } from './renderer/types';

export interface FxPane {
  title: string;
  graph: Graph;
  code: string;
}

export interface FxData {
  panes: FxPane[];
  summary?: Record<string, number>;
}

/** A tapelab.compile kernel's node: its name, the FX nodes it replaced and its generated sources. */
interface FusedKernel {
  name: string;
  members: string[];
  source?: string;
  cuda_source?: string;
}

type FxNode = GNode & {
  name?: string; opcode?: string; target?: string; args?: string; line?: number | null; diff?: string; fused?: FusedKernel;
};

export const FX_CSS = `
.tapelab-fx { font: 12px var(--jp-ui-font-family, system-ui, sans-serif); color: var(--jp-ui-font-color1, #1f2937); }
.tapelab-fx-summary { display: flex; gap: 10px; align-items: center; padding: 2px 4px 6px; }
.tapelab-fx-summary .tapelab-fx-badge { padding: 1px 6px; border-radius: 8px; border: 1px solid; }
.tapelab-fx-panes { display: flex; gap: 8px; align-items: stretch; }
.tapelab-fx-pane { flex: 1 1 0; min-width: 0; display: flex; flex-direction: column; }
.tapelab-fx-title { font-weight: bold; padding: 2px 4px; }
.tapelab-fx-body { display: flex; gap: 6px; height: 460px; }
.tapelab-fx-body > .tapelab-graph { flex: 1 1 58%; min-width: 0; }
.tapelab-fx .tapelab-graph.tapelab-fixed { height: 100%; }
.tapelab-fx-code { flex: 1 1 42%; min-width: 0; margin: 0; overflow: auto; border: 1px solid var(--jp-border-color2, #e5e7eb); border-radius: 4px; padding: 4px 0; font: 11.5px var(--jp-code-font-family, ui-monospace, monospace); background: var(--jp-layout-color1, #fafafa); }
.tapelab-fx-diff .tapelab-fx-body { flex-direction: column; height: 680px; }
.tapelab-fx-diff .tapelab-fx-body > .tapelab-graph { flex: 1 1 62%; }
.tapelab-fx-diff .tapelab-fx-code { flex: 1 1 38%; }
.tapelab-code-line { white-space: pre; padding: 0 8px 0 0; cursor: default; border-left: 3px solid transparent; }
.tapelab-code-line .tapelab-code-no { display: inline-block; width: 2.6em; padding-right: 6px; text-align: right; color: #9ca3af; user-select: none; }
.tapelab-code-line.tapelab-code-node { cursor: pointer; }
.tapelab-code-line.tapelab-diff-added { background: #dcfce7; border-left-color: #16a34a; }
.tapelab-code-line.tapelab-diff-removed { background: #fee2e2; border-left-color: #dc2626; }
.tapelab-code-line.tapelab-diff-changed { background: #fef3c7; border-left-color: #d97706; }
.tapelab-code-line.tapelab-code-hl { background: #bae6fd; border-left-color: #0284c7; }
.tapelab-fx .tapelab-unit.tapelab-diff-added rect.tapelab-box { fill: #dcfce7; stroke: #16a34a; stroke-width: 2; }
.tapelab-fx .tapelab-unit.tapelab-diff-removed rect.tapelab-box { fill: #fee2e2; stroke: #dc2626; stroke-width: 2; }
.tapelab-fx .tapelab-unit.tapelab-diff-changed rect.tapelab-box { fill: #fef3c7; stroke: #d97706; stroke-width: 2; }
.tapelab-fx .tapelab-unit.tapelab-hl rect.tapelab-box { stroke: #0284c7; stroke-width: 3.5; }
.tapelab-fx-badge.tapelab-diff-added { background: #dcfce7; border-color: #16a34a; }
.tapelab-fx-badge.tapelab-diff-removed { background: #fee2e2; border-color: #dc2626; }
.tapelab-fx-badge.tapelab-diff-changed { background: #fef3c7; border-color: #d97706; }
.tapelab-fx-badge.tapelab-diff-same { border-color: #9ca3af; }
.tapelab-fx .tapelab-unit.tapelab-fused rect.tapelab-box { stroke: #7c3aed; stroke-width: 2; stroke-dasharray: 5 2; }
.tapelab-fx-kernel { flex: 1 1 42%; min-width: 0; display: flex; flex-direction: column; }
.tapelab-fx-kernel .tapelab-fx-code { flex: 1 1 auto; }
.tapelab-fx-kernel-bar { display: flex; gap: 6px; align-items: center; padding: 0 0 4px; }
.tapelab-fx-kernel-bar b { flex: 1 1 auto; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.tapelab-fx-kernel-bar button { font: inherit; padding: 0 6px; cursor: pointer; }
.tapelab-fx-kernel-bar button[aria-pressed='true'] { background: #ede9fe; border-color: #7c3aed; }
`;

export function injectFxStyle(doc: Document = document): void {
  if (doc.getElementById('tapelab-fx-style')) {
    return;
  }
  const s = doc.createElement('style');
  s.id = 'tapelab-fx-style';
  s.textContent = FX_CSS;
  doc.head.appendChild(s);
}

function clip(s: string, n: number): string {
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}

/** For each line of `code`, the ids of the nodes it defines (from the nodes' `line` fields). */
export function lineNodes(graph: Graph, code: string): string[][] {
  const lines = code.split('\n').map(() => [] as string[]);
  for (const n of graph.nodes as FxNode[]) {
    if (n.line !== null && n.line !== undefined && n.line >= 0 && n.line < lines.length) {
      lines[n.line].push(n.id);
    }
  }
  return lines;
}

class FxPaneView {
  readonly node: HTMLDivElement;
  readonly store = new GraphStore();
  readonly view: GraphView;
  readonly code: HTMLPreElement;
  private readonly kernel: HTMLDivElement;
  private lines = new Map<number, HTMLDivElement>();
  private lineOf = new Map<string, number>();
  private byId = new Map<string, FxNode>();

  constructor(private owner: FxView, pane: FxPane) {
    this.node = el('div', 'tapelab-fx-pane');
    if (pane.title) {
      this.node.appendChild(el('div', 'tapelab-fx-title', pane.title));
    }
    const body = el('div', 'tapelab-fx-body');
    this.store.setGraph(pane.graph);
    for (const n of pane.graph.nodes as FxNode[]) {
      this.byId.set(n.id, n);
      if (n.line !== null && n.line !== undefined) {
        this.lineOf.set(n.id, n.line);
      }
    }
    this.view = new GraphView(this.store, {
      fixedHeight: true, viewKind: 'fx', decorate: (u, g) => this.decorate(u, g),
      facts: n => {
        const f = n as FxNode;
        const out: [string, string][] = f.opcode ? [['fx opcode', f.opcode + (f.target ? ' ' + f.target : '')]] : [];
        if (f.fused) {
          out.push(['fused ops', f.fused.members.join(', ')], ['kernel', 'click to read its generated source']);
        }
        return out;
      }
    });
    this.code = el('pre', 'tapelab-fx-code');
    const ids = lineNodes(pane.graph, pane.code || '');
    const text = (pane.code || '').split('\n');
    const first = Math.max(0, text.findIndex(line => line.trim() !== '')); // the source starts with blank lines
    text.forEach((line, i) => {
      if (i < first) {
        return;
      }
      const row = el('div', 'tapelab-code-line');
      row.dataset.line = String(i);
      row.appendChild(el('span', 'tapelab-code-no', String(i - first + 1)));
      row.appendChild(document.createTextNode(line));
      const mine = ids[i];
      if (mine.length) {
        row.classList.add('tapelab-code-node');
        row.dataset.nodes = mine.map(id => this.byId.get(id)?.name ?? id).join(' ');
        const status = mine.map(id => this.byId.get(id)?.diff).find(s => s && s !== 'same');
        if (status) {
          row.classList.add('tapelab-diff-' + status);
        }
        row.addEventListener('mouseenter', () => this.owner.highlight(mine, 'graph'));
        row.addEventListener('mouseleave', () => this.owner.highlight([], null));
      }
      this.code.appendChild(row);
      this.lines.set(i, row);
    });
    this.kernel = el('div', 'tapelab-fx-kernel');
    this.kernel.style.display = 'none';
    body.append(this.view.node, this.code, this.kernel);
    this.node.appendChild(body);
  }

  /** Show a fused kernel's generated source in place of the graph's code (a button returns). */
  showKernel(n: FxNode, which: 'cpu' | 'cuda' = 'cpu'): void {
    const k = n.fused!;
    this.kernel.textContent = '';
    this.kernel.dataset.kernel = k.name;
    this.kernel.dataset.source = which;
    const bar = el('div', 'tapelab-fx-kernel-bar');
    bar.appendChild(el('b', '', k.name));
    const button = (label: string, pressed: boolean, onClick: () => void) => {
      const b = el('button', '', label);
      b.setAttribute('aria-pressed', String(pressed));
      b.addEventListener('click', onClick);
      bar.appendChild(b);
    };
    if (k.source) {
      button('cpu', which === 'cpu', () => this.showKernel(n, 'cpu'));
    }
    if (k.cuda_source) {
      button('cuda', which === 'cuda', () => this.showKernel(n, 'cuda'));
    }
    button('graph code', false, () => this.hideKernel());
    const code = el('pre', 'tapelab-fx-code');
    code.textContent = (which === 'cuda' ? k.cuda_source : k.source) || '(no generated source)';
    this.kernel.append(bar, code);
    this.kernel.style.display = '';
    this.code.style.display = 'none';
  }

  hideKernel(): void {
    this.kernel.style.display = 'none';
    this.code.style.display = '';
    delete this.kernel.dataset.kernel;
  }

  private decorate(u: Unit, g: SVGElement): void {
    if (u.kind !== 'node' || !u.node) {
      return;
    }
    const n = u.node as FxNode;
    const texts = g.querySelectorAll('text');
    if (texts.length >= 2) {
      texts[0].textContent = clip(n.label, 18);
      texts[1].textContent = clip(n.op + (n.shape ? ' ' + fmtShape(n.shape) : ''), 22);
    }
    g.setAttribute('data-name', n.name ?? n.label);
    if (n.opcode) {
      g.setAttribute('data-opcode', n.opcode);
    }
    if (n.diff) {
      g.setAttribute('data-diff', n.diff);
      if (n.diff !== 'same') {
        g.classList.add('tapelab-diff-' + n.diff);
      }
    }
    if (this.owner.isHighlighted(u.id)) {
      g.classList.add('tapelab-hl');
    }
    if (n.fused) {
      g.classList.add('tapelab-fused');
      g.addEventListener('click', () => this.showKernel(n));
    }
    g.addEventListener('mouseenter', () => this.owner.highlight([u.id], 'code'));
    g.addEventListener('mouseleave', () => this.owner.highlight([], null));
  }

  /** Mark the given node ids (graph and code); scroll the code or nothing. */
  apply(ids: Set<string>, scroll: 'code' | 'graph' | null): void {
    if (scroll === 'graph') {
      for (const id of ids) {
        if (this.view.reveal(id)) {
          break; // pan to the first node of the line (paint re-decorates with the new highlight)
        }
      }
    }
    this.view.node.querySelectorAll('.tapelab-unit').forEach(g => {
      g.classList.toggle('tapelab-hl', ids.has(g.getAttribute('data-id') || ''));
    });
    for (const row of this.lines.values()) {
      row.classList.remove('tapelab-code-hl');
    }
    let first: HTMLDivElement | null = null;
    for (const id of ids) {
      const k = this.lineOf.get(id);
      const row = k === undefined ? undefined : this.lines.get(k);
      if (row) {
        row.classList.add('tapelab-code-hl');
        first = first || row;
      }
    }
    if (first && scroll === 'code') {
      // scroll the code panel only (never the notebook around it)
      const top = first.getBoundingClientRect().top - this.code.getBoundingClientRect().top + this.code.scrollTop;
      if (top < this.code.scrollTop || top + first.offsetHeight > this.code.scrollTop + this.code.clientHeight) {
        this.code.scrollTop = Math.max(0, top - this.code.clientHeight / 3);
      }
    }
  }

  dispose(): void {
    this.view.dispose();
  }
}

/** One or two FX panes with linked highlighting. */
export class FxView {
  readonly node: HTMLDivElement;
  private panes: FxPaneView[] = [];
  private current = new Set<string>();

  constructor(data: FxData) {
    this.node = el('div', 'tapelab-fx');
    this.setData(data);
  }

  setData(data: FxData): void {
    for (const p of this.panes) {
      p.dispose();
    }
    this.panes = [];
    this.current.clear();
    this.node.textContent = '';
    const panes = data.panes || [];
    this.node.classList.toggle('tapelab-fx-diff', panes.length > 1);
    if (data.summary && Object.keys(data.summary).length) {
      const bar = el('div', 'tapelab-fx-summary');
      for (const k of ['added', 'removed', 'changed', 'same']) {
        if (k in data.summary) {
          const b = el('span', 'tapelab-fx-badge tapelab-diff-' + k, `${k} ${data.summary[k]}`);
          b.dataset.status = k;
          bar.appendChild(b);
        }
      }
      this.node.appendChild(bar);
    }
    const row = el('div', 'tapelab-fx-panes');
    for (const p of panes) {
      const pv = new FxPaneView(this, p);
      this.panes.push(pv);
      row.appendChild(pv.node);
    }
    this.node.appendChild(row);
    injectFxStyle(); // after the renderer's stylesheet, so diff colours win
    this.node.dataset.panes = String(panes.length);
  }

  isHighlighted(id: string): boolean {
    return this.current.has(id);
  }

  /** Highlight nodes (by view-model id) in every pane; `scroll` says which side follows. */
  highlight(ids: string[], scroll: 'code' | 'graph' | null): void {
    this.current = new Set(ids);
    for (const p of this.panes) {
      p.apply(this.current, scroll);
    }
    this.node.dataset.hover = ids.map(id => id.replace(/^fx:/, '')).join(' ');
  }

  dispose(): void {
    for (const p of this.panes) {
      p.dispose();
    }
    this.node.remove();
  }
}

interface FxModel {
  get(name: string): any;
  on(event: string, cb: (...args: any[]) => void): void;
  off(event?: string, cb?: (...args: any[]) => void): void;
}

/** The anywidget render of tapelab.widgets.GraphView (`_view == "fx"`). */
export function renderFxWidget({ model, el: host }: { model: FxModel; el: HTMLElement }): () => void {
  const view = new FxView({ panes: model.get('panes') || [], summary: model.get('summary') || {} });
  host.appendChild(view.node);
  const update = () => view.setData({ panes: model.get('panes') || [], summary: model.get('summary') || {} });
  model.on('change:panes', update);
  model.on('change:summary', update);
  return () => {
    model.off('change:panes', update);
    model.off('change:summary', update);
    view.dispose();
  };
}
