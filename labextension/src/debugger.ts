/**
 * The backward debugger (tapelab.widgets.Debugger, `_view == "debugger"`): the tape view's
 * GraphView over the stepper's backward graph, with the current node highlighted, visited
 * nodes marked, breakpoints (click a node) as red dots; a toolbar with Step, Step over
 * module, Continue, Run to NaN; a panel with the current node's incoming and outgoing
 * gradients drawn by the TensorView renderer, and where a NaN came from.
 *
 * Buttons send `{type: "cmd", cmd}` custom messages; the kernel runs the stepper and updates
 * the synced `state` and `grads` traits. Every live debugger registers itself on
 * `window.tapelabDebuggers`, which the labextension's palette commands and shortcuts use
 * (the focused one, else the last one used or rendered). Strings go into the DOM through
 * textContent only.
 */
import { GraphStore, Unit } from './renderer/store';
import { GraphView } from './renderer/view';
import { el, fmtNum } from './renderer/format';
import { renderTensor, TensorData } from './renderer/tensor';
import { Graph } from './renderer/types';

export type DebuggerCommand = 'step' | 'step_over' | 'continue' | 'run_to_nan' | 'finish';

export interface DebuggerState {
  seq: number;
  command: string;
  done: boolean;
  steps: number;
  stop_reason: string | null;
  error: string | null;
  status: string;
  current: {
    id: string; node_id: number; index: number; name: string; module: string; forward_op: string | null;
    source: { file: string | null; line: number | null; code: string | null; text: string } | null;
    finite: boolean; max_grad_norm: number | string | null;
  } | null;
  visited: string[];
  next: string[];
  breakpoints: { number: number; label: string; hits: number; node: string | null }[];
  nonfinite: string[];
  provenance: Record<string, unknown> | null;
  explain: string;
}

type GradView = (TensorData & { target?: string | null }) | { name: string; none: true; target?: string | null };

export interface DebuggerGrads {
  node: string | null;
  incoming: GradView[];
  outgoing: GradView[];
}

/** What the labextension's commands see of a debugger. */
export interface DebuggerHandle {
  node: HTMLElement;
  lastActive: number;
  command(cmd: DebuggerCommand): void;
}

export const DEBUGGER_CSS = `
.tapelab-debugger { font: 12px var(--jp-ui-font-family, system-ui, sans-serif); color: var(--jp-ui-font-color1, #1f2937); outline: none; }
.tapelab-debugger:focus-within { box-shadow: 0 0 0 2px rgba(37, 99, 235, .25); border-radius: 4px; }
.tapelab-dbg-bar { display: flex; gap: 6px; align-items: center; padding: 4px 2px 6px; flex-wrap: wrap; }
.tapelab-dbg-bar button { font: inherit; padding: 2px 8px; cursor: pointer; }
.tapelab-dbg-bar button:disabled { cursor: default; opacity: .5; }
.tapelab-dbg-status { color: var(--jp-ui-font-color2, #4b5563); margin-left: 6px; }
.tapelab-dbg-status.tapelab-dbg-bad { color: #b91c1c; font-weight: bold; }
.tapelab-dbg-body { display: flex; gap: 8px; height: 440px; }
.tapelab-dbg-body > .tapelab-graph { flex: 1 1 60%; min-width: 0; }
.tapelab-debugger .tapelab-graph.tapelab-fixed { height: 100%; }
.tapelab-dbg-side { flex: 1 1 40%; min-width: 0; overflow: auto; border: 1px solid var(--jp-border-color2, #e5e7eb); border-radius: 4px; padding: 4px 6px; }
.tapelab-dbg-side h4 { margin: 6px 0 2px; font-size: 12px; }
.tapelab-dbg-side .tapelab-tensor { display: flex; flex-wrap: wrap; border-top: 1px dotted #e5e7eb; }
.tapelab-dbg-explain { white-space: pre-wrap; background: #fef2f2; border-left: 3px solid #dc2626; padding: 4px 6px; margin: 4px 0; font: 11px var(--jp-code-font-family, ui-monospace, monospace); }
.tapelab-dbg-where { color: #6b7280; font: 11px var(--jp-code-font-family, ui-monospace, monospace); white-space: pre-wrap; }
.tapelab-dbg-hint { color: #9ca3af; font-size: 11px; }
.tapelab-debugger .tapelab-unit.tapelab-dbg-visited rect.tapelab-box { fill: #e5e7eb; stroke: #6b7280; stroke-dasharray: none; }
.tapelab-debugger .tapelab-unit.tapelab-dbg-next rect.tapelab-box { stroke: #2563eb; stroke-dasharray: 2 2; stroke-width: 1.5; }
.tapelab-debugger .tapelab-unit.tapelab-dbg-nan rect.tapelab-box { fill: #fee2e2; stroke: #dc2626; }
.tapelab-debugger .tapelab-unit.tapelab-dbg-current rect.tapelab-box { fill: #fde047; stroke: #a16207; stroke-width: 3; stroke-dasharray: none; }
.tapelab-debugger .tapelab-unit.tapelab-dbg-current.tapelab-dbg-nan rect.tapelab-box { fill: #fca5a5; stroke: #991b1b; }
.tapelab-debugger .tapelab-dbg-dot { fill: #dc2626; stroke: #fff; stroke-width: 1; }
`;

function injectDebuggerStyle(doc: Document = document): void {
  if (doc.getElementById('tapelab-debugger-style')) {
    return;
  }
  const s = doc.createElement('style');
  s.id = 'tapelab-debugger-style';
  s.textContent = DEBUGGER_CSS;
  doc.head.appendChild(s);
}

function registry(): DebuggerHandle[] {
  const w = window as any;
  if (!w.tapelabDebuggers) {
    w.tapelabDebuggers = [];
  }
  return w.tapelabDebuggers as DebuggerHandle[];
}

const KEYS: Record<string, DebuggerCommand> = { F10: 'step', 'Shift+F10': 'step_over', F8: 'continue', 'Shift+F8': 'run_to_nan' };

export class DebuggerView implements DebuggerHandle {
  readonly node: HTMLDivElement;
  readonly store = new GraphStore();
  readonly view: GraphView;
  lastActive = Date.now();
  private state: DebuggerState | null = null;
  private grads: DebuggerGrads | null = null;
  private status: HTMLSpanElement;
  private side: HTMLDivElement;
  private buttons = new Map<DebuggerCommand, HTMLButtonElement>();

  constructor(private send: (msg: Record<string, unknown>) => void) {
    injectDebuggerStyle();
    this.node = el('div', 'tapelab-debugger');
    this.node.tabIndex = 0; // focusable: the shortcuts act on the focused debugger
    const bar = el('div', 'tapelab-dbg-bar');
    const add = (cmd: DebuggerCommand, label: string, title: string) => {
      const b = el('button', 'tapelab-dbg-' + cmd.replace(/_/g, '-'), label);
      b.title = title;
      b.dataset.cmd = cmd;
      b.addEventListener('click', () => this.command(cmd));
      this.buttons.set(cmd, b);
      bar.appendChild(b);
    };
    add('step', 'Step', 'run one node of the backward pass (F10)');
    add('step_over', 'Step over module', 'run until the walk leaves the current module (Shift+F10)');
    add('continue', 'Continue', 'run to the next breakpoint or the end (F8)');
    add('run_to_nan', 'Run to NaN', 'run to the first node producing a NaN/Inf gradient (Shift+F8)');
    this.status = el('span', 'tapelab-dbg-status');
    bar.appendChild(this.status);
    bar.appendChild(el('span', 'tapelab-dbg-hint', 'click a node: breakpoint'));
    this.node.appendChild(bar);
    const body = el('div', 'tapelab-dbg-body');
    this.view = new GraphView(this.store, { fixedHeight: true, viewKind: 'debugger', layout: 'hand', decorate: (u, g) => this.decorate(u, g) });
    this.side = el('div', 'tapelab-dbg-side');
    body.append(this.view.node, this.side);
    this.node.appendChild(body);
    this.node.addEventListener('keydown', ev => {
      if (ev.defaultPrevented) {
        return; // JupyterLab's keymap already ran the command
      }
      const cmd = KEYS[(ev.shiftKey ? 'Shift+' : '') + ev.key];
      if (cmd) {
        ev.preventDefault();
        this.command(cmd);
      }
    });
    const touch = () => {
      this.lastActive = Date.now();
    };
    this.node.addEventListener('pointerdown', touch);
    this.node.addEventListener('focusin', touch);
    registry().push(this);
  }

  command(cmd: DebuggerCommand): void {
    this.lastActive = Date.now();
    if (this.state?.done) {
      return;
    }
    this.node.dataset.pending = cmd;
    this.send({ type: 'cmd', cmd });
  }

  toggleBreakpoint(id: string): void {
    this.lastActive = Date.now();
    this.send({ type: 'cmd', cmd: 'toggle_breakpoint', node: id });
  }

  setGraph(g: Graph | null): void {
    if (g && g.nodes) {
      this.store.setGraph(g);
    }
  }

  setState(state: DebuggerState | null, grads: DebuggerGrads | null): void {
    this.state = state;
    this.grads = grads;
    const d = this.node.dataset;
    delete d.pending;
    if (!state) {
      return;
    }
    d.seq = String(state.seq);
    d.current = state.current?.id ?? '';
    d.currentName = state.current?.name ?? '';
    d.steps = String(state.steps);
    d.done = String(state.done);
    d.stopReason = state.stop_reason ?? '';
    d.visited = String(state.visited.length);
    d.breakpoints = state.breakpoints.map(b => b.node).filter(Boolean).join(' ');
    this.status.textContent = state.status;
    this.status.classList.toggle('tapelab-dbg-bad', !!state.error || (state.current !== null && !state.current.finite));
    for (const [cmd, b] of this.buttons) {
      b.disabled = state.done && cmd !== 'finish';
    }
    this.applyMarks();
    this.renderSide();
    const reveal = (this.view as any).reveal; // pan to the current node where the renderer can
    if (state.current && typeof reveal === 'function') {
      reveal.call(this.view, state.current.id);
    }
  }

  /** The class names of one unit under the current state. */
  private marks(u: Unit): string[] {
    const s = this.state;
    if (!s) {
      return [];
    }
    const out: string[] = [];
    const ids = u.kind === 'node' ? new Set([u.id]) : this.groupMembers(u.id);
    const has = (list: (string | null)[]) => list.some(x => x !== null && ids.has(x));
    if (s.current && ids.has(s.current.id)) {
      out.push('tapelab-dbg-current');
    }
    if (has(s.visited)) {
      out.push('tapelab-dbg-visited');
    }
    if (has(s.next)) {
      out.push('tapelab-dbg-next');
    }
    if (has(s.nonfinite)) {
      out.push('tapelab-dbg-nan');
    }
    if (has(s.breakpoints.map(b => b.node))) {
      out.push('tapelab-dbg-bp');
    }
    return out;
  }

  private groupMembers(gid: string): Set<string> {
    const ids = new Set<string>();
    for (const n of this.store.nodes) {
      let g = n.group;
      while (g) {
        if (g === gid) {
          ids.add(n.id);
          break;
        }
        g = this.store.groups.get(g)?.parent ?? null;
      }
    }
    return ids;
  }

  private decorate(u: Unit, g: SVGElement): void {
    if (u.kind === 'node' && u.node) {
      const n = u.node as any;
      const texts = g.querySelectorAll('text');
      if (texts.length >= 2) {
        texts[0].textContent = clip(n.label, 18);
        texts[1].textContent = clip(n.module || n.forward_op || '', 22);
      }
      g.addEventListener('click', ev => {
        // a click on a node toggles its breakpoint (instead of pinning the hover card)
        ev.stopImmediatePropagation();
        this.toggleBreakpoint(u.id);
      }, { capture: true });
    }
    this.mark(g, this.marks(u));
  }

  private mark(g: Element, classes: string[]): void {
    for (const c of ['tapelab-dbg-current', 'tapelab-dbg-visited', 'tapelab-dbg-next', 'tapelab-dbg-nan', 'tapelab-dbg-bp']) {
      g.classList.toggle(c, classes.includes(c));
    }
    const dot = g.querySelector('.tapelab-dbg-dot');
    if (classes.includes('tapelab-dbg-bp')) {
      if (!dot) {
        const c = document.createElementNS('http://www.w3.org/2000/svg', 'circle');
        c.setAttribute('class', 'tapelab-dbg-dot');
        c.setAttribute('cx', '0');
        c.setAttribute('cy', '0');
        c.setAttribute('r', '5');
        g.appendChild(c);
      }
    } else if (dot) {
      dot.remove();
    }
  }

  /** Re-mark the drawn units (no relayout). */
  private applyMarks(): void {
    const units = new Map<string, Unit>();
    for (const u of this.store.visible().units) {
      units.set(u.id, u);
    }
    this.view.node.querySelectorAll('.tapelab-unit').forEach(g => {
      const u = units.get(g.getAttribute('data-id') || '');
      if (u) {
        this.mark(g, this.marks(u));
      }
    });
  }

  private renderSide(): void {
    const s = this.state;
    const side = this.side;
    side.textContent = '';
    if (!s) {
      return;
    }
    const cur = s.current;
    if (!cur) {
      side.appendChild(el('div', 'tapelab-dbg-hint', s.done ? 'the backward pass is over' : 'press Step to run the first node'));
      side.dataset.node = '';
      return;
    }
    side.dataset.node = cur.id;
    side.appendChild(el('h4', 'tapelab-dbg-title', `${cur.name}` + (cur.module ? ` — ${cur.module}` : '')));
    const where: string[] = [];
    if (cur.forward_op) {
      where.push(`forward op: ${cur.forward_op}`);
    }
    if (cur.source) {
      where.push(cur.source.code ? `line ${cur.source.line}: ${cur.source.code}` : cur.source.text);
    }
    where.push(`max ‖grad‖ ${typeof cur.max_grad_norm === 'number' ? fmtNum(cur.max_grad_norm) : String(cur.max_grad_norm)}`);
    side.appendChild(el('div', 'tapelab-dbg-where', where.join('\n')));
    if (s.explain) {
      side.appendChild(el('div', 'tapelab-dbg-explain', s.explain));
    }
    const g = this.grads;
    const section = (title: string, list: GradView[], cls: string) => {
      const box = el('div', cls);
      box.appendChild(el('h4', '', title));
      if (!list.length) {
        box.appendChild(el('div', 'tapelab-dbg-hint', 'none'));
      }
      for (const t of list) {
        if ('none' in t) {
          box.appendChild(el('div', 'tapelab-dbg-hint', `${t.name}: None`));
        } else {
          const v = renderTensor(t as TensorData);
          v.dataset.name = t.name;
          box.appendChild(v);
        }
      }
      side.appendChild(box);
    };
    if (g && g.node === cur.id) {
      section('gradient in (w.r.t. the op\'s output)', g.incoming, 'tapelab-dbg-in');
      section('gradients out (to the next nodes)', g.outgoing, 'tapelab-dbg-out');
    }
  }

  dispose(): void {
    const list = registry();
    const i = list.indexOf(this);
    if (i >= 0) {
      list.splice(i, 1);
    }
    this.view.dispose();
    this.node.remove();
  }
}

function clip(s: string, n: number): string {
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}

interface DbgModel {
  get(name: string): any;
  on(event: string, cb: (...args: any[]) => void): void;
  off(event?: string, cb?: (...args: any[]) => void): void;
  send(content: any): void;
}

/** The anywidget render of tapelab.widgets.Debugger (`_view == "debugger"`). */
export function renderDebuggerWidget({ model, el: host }: { model: DbgModel; el: HTMLElement }): () => void {
  const view = new DebuggerView(msg => model.send(msg));
  view.setGraph(model.get('graph') as Graph);
  view.setState(model.get('state') as DebuggerState, model.get('grads') as DebuggerGrads);
  host.appendChild(view.node);
  const onGraph = () => view.setGraph(model.get('graph') as Graph);
  const onState = () => view.setState(model.get('state') as DebuggerState, model.get('grads') as DebuggerGrads);
  model.on('change:graph', onGraph);
  model.on('change:state', onState);
  model.on('change:grads', onState);
  return () => {
    model.off('change:graph', onGraph);
    model.off('change:state', onState);
    model.off('change:grads', onState);
    view.dispose();
  };
}
