/**
 * The capture view (tapelab.widgets.CaptureView, `_view` "capture"; the mime type
 * application/vnd.tapelab.capture+json; the side panel's capture dock): a captured graph as
 * widgets/captureview.py's capture_model writes it. The steps are drawn by the tape view's
 * GraphView (ops with shapes, grouped by source line; static inputs, in-place state and static
 * outputs marked), beside the numbers: pool size and buffer reuse, replays, time per replay next
 * to the eager step. Strings go into the DOM through textContent only.
 */
import { GraphStore, Unit } from './renderer/store';
import { GraphView } from './renderer/view';
import { el, fmtShape } from './renderer/format';
import { Graph, GNode } from './renderer/types';
import { Fact } from './renderer/selection';

export const CAPTURE_MIME = 'application/vnd.tapelab.capture+json';

export interface CaptureBuffer {
  name: string;
  role: 'input' | 'state' | 'output' | 'intermediate' | 'constant';
  shape: number[];
  dtype: string;
  nbytes: number;
  reads: number;
  writes: number;
  label: string;
}

export interface CaptureModel {
  schema: string;
  version: number;
  title: string;
  device: string;
  captured: boolean;
  graph: Graph;
  buffers: CaptureBuffer[];
  stats: Record<string, number>;
  timing: {
    replays: number;
    replay_us: number | null;
    eager_us: number | null;
    speedup: number | null;
    repeat?: number | null;
    source?: string;
  };
  static_inputs: string[];
  source?: string;
}

type CapNode = GNode & { role?: string; static_out?: boolean; writes_static?: boolean; step_kind?: string; where?: string; buffer?: string };

export const CAPTURE_CSS = `
.tapelab-capture { font: 12px var(--jp-ui-font-family, system-ui, sans-serif); color: var(--jp-ui-font-color1, #1f2937); }
.tapelab-cap-head { display: flex; gap: 8px; align-items: baseline; padding: 2px 4px; }
.tapelab-cap-title { font-weight: bold; }
.tapelab-cap-stats { display: flex; flex-wrap: wrap; gap: 6px; padding: 4px; }
.tapelab-cap-stat { border: 1px solid var(--jp-border-color2, #e5e7eb); border-radius: 6px; padding: 2px 8px; background: var(--jp-layout-color1, #fff); }
.tapelab-cap-stat b { font-size: 13px; margin-right: 4px; }
.tapelab-cap-timing { padding: 4px 6px; display: grid; grid-template-columns: max-content 1fr max-content; gap: 3px 8px; align-items: center; max-width: 640px; }
.tapelab-cap-bar { height: 12px; border-radius: 3px; min-width: 2px; }
.tapelab-cap-bar.tapelab-cap-eager { background: #94a3b8; }
.tapelab-cap-bar.tapelab-cap-replay { background: #16a34a; }
.tapelab-cap-speedup { grid-column: 1 / 4; font-weight: bold; color: #15803d; }
.tapelab-cap-hint { color: #6b7280; padding: 2px 6px; }
.tapelab-cap-body { display: flex; gap: 6px; height: 440px; }
.tapelab-cap-body > .tapelab-graph { flex: 1 1 65%; min-width: 0; }
.tapelab-capture .tapelab-graph.tapelab-fixed { height: 100%; }
.tapelab-cap-side { flex: 1 1 35%; min-width: 0; overflow: auto; border: 1px solid var(--jp-border-color2, #e5e7eb); border-radius: 4px; }
.tapelab-cap-buffers { border-collapse: collapse; width: 100%; font-size: 11px; }
.tapelab-cap-buffers th, .tapelab-cap-buffers td { padding: 1px 5px; text-align: left; white-space: nowrap; }
.tapelab-cap-buffers th { position: sticky; top: 0; background: var(--jp-layout-color2, #f3f4f6); }
.tapelab-cap-role { display: inline-block; width: 9px; height: 9px; border-radius: 2px; margin-right: 4px; border: 1px solid; }
.tapelab-cap-role-input { background: #fef9c3; border-color: #ca8a04; }
.tapelab-cap-role-state { background: #fae8ff; border-color: #a21caf; }
.tapelab-cap-role-output { background: #dcfce7; border-color: #16a34a; }
.tapelab-cap-role-intermediate { background: #dbeafe; border-color: #2563eb; }
.tapelab-cap-role-constant { background: #f3f4f6; border-color: #9ca3af; }
.tapelab-cap-legend { display: flex; flex-wrap: wrap; gap: 10px; padding: 3px 6px; color: #4b5563; }
.tapelab-capture .tapelab-unit.tapelab-cap-in rect.tapelab-box { fill: #fef9c3; stroke: #ca8a04; stroke-width: 1.5; }
.tapelab-capture .tapelab-unit.tapelab-cap-state rect.tapelab-box { fill: #fae8ff; stroke: #a21caf; stroke-width: 1.5; }
.tapelab-capture .tapelab-unit.tapelab-cap-out rect.tapelab-box { fill: #dcfce7; stroke: #16a34a; stroke-width: 2.5; }
.tapelab-capture .tapelab-unit.tapelab-cap-inplace rect.tapelab-box { stroke: #a21caf; stroke-width: 2.5; stroke-dasharray: 5 2; }
.tapelab-capture .tapelab-unit.tapelab-cap-guard rect.tapelab-box { fill: #fee2e2; stroke: #dc2626; }
.tapelab-panel-capture { border-top: 1px solid var(--jp-border-color2, #e5e7eb); max-height: 55%; overflow: auto; }
.tapelab-panel-capture .tapelab-cap-body { height: 300px; flex-direction: column; }
.tapelab-panel-capture .tapelab-cap-side { display: none; }
.tapelab-panel-capture-head { display: flex; justify-content: space-between; padding: 2px 6px; font-weight: bold; }
`;

export function injectCaptureStyle(doc: Document = document): void {
  if (doc.getElementById('tapelab-capture-style')) {
    return;
  }
  const s = doc.createElement('style');
  s.id = 'tapelab-capture-style';
  s.textContent = CAPTURE_CSS;
  doc.head.appendChild(s);
}

export function fmtBytes(b: number): string {
  let v = b || 0;
  for (const unit of ['B', 'KB', 'MB', 'GB']) {
    if (Math.abs(v) < 1024 || unit === 'GB') {
      return unit === 'B' ? `${v.toFixed(0)} B` : `${v.toFixed(1)} ${unit}`;
    }
    v /= 1024;
  }
  return String(b);
}

export function fmtUs(us: number | null | undefined): string {
  if (us === null || us === undefined) {
    return '–';
  }
  return us < 1e3 ? `${us.toFixed(1)} µs` : us < 1e6 ? `${(us / 1e3).toFixed(2)} ms` : `${(us / 1e6).toFixed(2)} s`;
}

function clip(s: string, n: number): string {
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}

/** What a capture knows of a step: its replay step, the buffer it writes and the source line. */
function captureFacts(n: CapNode): Fact[] {
  const out: Fact[] = [];
  if (n.kind !== 'leaf' && n.index !== null) {
    out.push(['capture step', String(n.index) + (n.step_kind && n.step_kind !== 'op' ? ` (${n.step_kind})` : '')]);
  }
  if (n.buffer) {
    out.push(['capture buffer', n.buffer + (n.static_out ? ' (static output)' : n.writes_static ? ' (written in place)' : '')]);
  }
  if (n.where) {
    out.push(['source', n.where]);
  }
  return out;
}

const ROLE_TEXT: Record<string, string> = {
  input: 'static input',
  state: 'static, updated in place',
  output: 'static output',
  intermediate: 'pool buffer',
  constant: 'constant'
};

/** Draws one capture model; `setModel` redraws (a refreshed replay count, new timings). */
export class CaptureRenderer {
  readonly node: HTMLDivElement;
  readonly store = new GraphStore();
  private view: GraphView | null = null;

  constructor(model: CaptureModel, private opts: { compact?: boolean } = {}) {
    injectCaptureStyle();
    this.node = el('div', 'tapelab-capture');
    this.setModel(model);
  }

  setModel(m: CaptureModel): void {
    this.view?.dispose();
    this.node.textContent = '';
    const s = m.stats || {};
    const t = m.timing || ({ replays: 0 } as CaptureModel['timing']);
    const d = this.node.dataset;
    d.steps = String(s.steps ?? 0);
    d.poolBytes = String(s.pool_nbytes ?? 0);
    d.replays = String(t.replays ?? 0);
    d.replayUs = t.replay_us === null || t.replay_us === undefined ? '' : String(t.replay_us);
    d.eagerUs = t.eager_us === null || t.eager_us === undefined ? '' : String(t.eager_us);

    const head = el('div', 'tapelab-cap-head');
    head.appendChild(el('span', 'tapelab-cap-title', m.title || 'captured graph'));
    head.appendChild(el('span', '', `${m.device} · ${m.captured ? 'captured' : 'not captured'}`));
    this.node.appendChild(head);

    const stats = el('div', 'tapelab-cap-stats');
    const stat = (key: string, value: string, label: string, title = '') => {
      const c = el('span', 'tapelab-cap-stat');
      c.dataset.key = key;
      c.appendChild(el('b', '', value));
      c.appendChild(document.createTextNode(label));
      if (title) {
        c.title = title;
      }
      stats.appendChild(c);
    };
    stat('steps', String(s.steps ?? 0), `steps (${s.ops ?? 0} ops${s.guards ? `, ${s.guards} guards` : ''})`);
    stat('pool', fmtBytes(s.pool_nbytes ?? 0), 'pool',
      (s.pool_graphs ?? 0) > 1 ? `shared by ${s.pool_graphs} graphs: ${fmtBytes(s.pool_shared_nbytes ?? 0)} in all` : 'this graph\'s memory pool');
    stat('reuse', fmtBytes(s.reused_bytes ?? 0), `reused per replay · 0 allocations`,
      `${(s.intermediates ?? 0) + (s.static_outputs ?? 0)} buffers allocated once at capture and overwritten by every replay; ${s.inplace_writes ?? 0} in-place writes`);
    stat('inputs', String(s.static_inputs ?? 0), 'static inputs');
    stat('state', String(s.static_state ?? 0), 'updated in place');
    stat('outputs', String(s.static_outputs ?? 0), 'static outputs');
    stat('replays', String(t.replays ?? 0), 'replays');
    if ((s.pool_graphs ?? 0) > 1) {
      stat('shared', String(s.pool_graphs), 'graphs share the pool');
    }
    this.node.appendChild(stats);

    if (t.replay_us) {
      const tm = el('div', 'tapelab-cap-timing');
      const max = Math.max(t.replay_us, t.eager_us || 0);
      const row = (cls: string, label: string, us: number) => {
        tm.appendChild(el('span', '', label));
        const bar = el('div', 'tapelab-cap-bar ' + cls);
        bar.style.width = `${Math.max(0.5, (100 * us) / max)}%`;
        tm.appendChild(bar);
        tm.appendChild(el('span', 'tapelab-cap-time', fmtUs(us)));
      };
      if (t.eager_us) {
        row('tapelab-cap-eager', 'eager step', t.eager_us);
      }
      row('tapelab-cap-replay', 'replay', t.replay_us);
      if (t.speedup) {
        tm.appendChild(el('span', 'tapelab-cap-speedup', `replay is ${t.speedup}× faster than the eager step` +
          (t.source === 'measured' && t.repeat ? ` (best of ${t.repeat} runs each)` : '')));
      }
      this.node.appendChild(tm);
    } else if (!this.opts.compact) {
      this.node.appendChild(el('div', 'tapelab-cap-hint',
        'no timing: CaptureView(g, eager=step, repeat=20) times replays against the eager step'));
    }

    const legend = el('div', 'tapelab-cap-legend');
    for (const r of ['input', 'state', 'output', 'intermediate']) {
      const item = el('span');
      item.appendChild(el('span', 'tapelab-cap-role tapelab-cap-role-' + r));
      item.appendChild(document.createTextNode(ROLE_TEXT[r]));
      legend.appendChild(item);
    }
    this.node.appendChild(legend);

    const body = el('div', 'tapelab-cap-body');
    this.store.setGraph(m.graph || { nodes: [], edges: [], groups: [] });
    this.view = new GraphView(this.store, {
      fixedHeight: true, viewKind: 'capture', decorate: (u, g) => this.decorate(u, g), facts: n => captureFacts(n as CapNode)
    });
    body.appendChild(this.view.node);
    const side = el('div', 'tapelab-cap-side');
    side.appendChild(this.bufferTable(m.buffers || []));
    body.appendChild(side);
    this.node.appendChild(body);
  }

  private bufferTable(buffers: CaptureBuffer[]): HTMLTableElement {
    const table = el('table', 'tapelab-cap-buffers');
    const head = el('tr');
    for (const h of ['buffer', 'shape', 'dtype', 'bytes', 'r/w']) {
      head.appendChild(el('th', '', h));
    }
    table.appendChild(el('thead')).appendChild(head);
    const tbody = el('tbody');
    let pooled = 0;
    let pooledBytes = 0;
    for (const b of buffers) {
      if (b.role === 'intermediate') {
        pooled++;
        pooledBytes += b.nbytes;
        continue;
      }
      const tr = el('tr');
      tr.dataset.role = b.role;
      tr.dataset.name = b.name;
      tr.title = ROLE_TEXT[b.role] || b.role;
      const name = el('td');
      name.appendChild(el('span', 'tapelab-cap-role tapelab-cap-role-' + b.role));
      name.appendChild(document.createTextNode(clip(b.label || b.name, 28)));
      tr.appendChild(name);
      tr.appendChild(el('td', '', fmtShape(b.shape)));
      tr.appendChild(el('td', '', b.dtype));
      tr.appendChild(el('td', '', fmtBytes(b.nbytes)));
      tr.appendChild(el('td', '', `${b.reads}/${b.writes}`));
      tbody.appendChild(tr);
    }
    if (pooled) {
      const tr = el('tr');
      tr.dataset.role = 'intermediate';
      const name = el('td');
      name.appendChild(el('span', 'tapelab-cap-role tapelab-cap-role-intermediate'));
      name.appendChild(document.createTextNode(`${pooled} pool buffers`));
      tr.appendChild(name);
      tr.appendChild(el('td', '', ''));
      tr.appendChild(el('td', '', ''));
      tr.appendChild(el('td', '', fmtBytes(pooledBytes)));
      tr.appendChild(el('td', '', ''));
      tbody.appendChild(tr);
    }
    table.appendChild(tbody);
    return table;
  }

  private decorate(u: Unit, g: SVGElement): void {
    if (u.kind !== 'node' || !u.node) {
      return;
    }
    const n = u.node as CapNode;
    const texts = g.querySelectorAll('text');
    if (n.kind === 'leaf') {
      g.classList.add(n.role === 'state' ? 'tapelab-cap-state' : n.role === 'input' ? 'tapelab-cap-in' : 'tapelab-cap-const');
      g.setAttribute('data-role', n.role || '');
      if (texts.length >= 2) {
        texts[0].textContent = clip(n.label, 18);
        texts[1].textContent = clip(fmtShape(n.shape) + ' ' + (n.role || ''), 22);
      }
      return;
    }
    g.setAttribute('data-step', String(n.index));
    if (n.static_out) {
      g.classList.add('tapelab-cap-out');
    }
    if (n.writes_static) {
      g.classList.add('tapelab-cap-inplace');
    }
    if (n.step_kind === 'guard') {
      g.classList.add('tapelab-cap-guard');
    }
    if (texts.length >= 2) {
      texts[0].textContent = clip(`${n.index}: ${n.op}` + (n.writes_static ? ' (in place)' : ''), 18);
    }
  }

  dispose(): void {
    this.view?.dispose();
    this.node.remove();
  }
}

interface Model {
  get(name: string): any;
  on(event: string, cb: (...args: any[]) => void): void;
  off(event?: string, cb?: (...args: any[]) => void): void;
}

/** The anywidget view of a CaptureView. */
export function renderCaptureWidget({ model, el: host }: { model: Model; el: HTMLElement }): () => void {
  let view: CaptureRenderer | null = null;
  const draw = () => {
    const m = model.get('capture') as CaptureModel;
    if (!m || !m.graph) {
      host.textContent = 'no capture';
      return;
    }
    if (view) {
      view.setModel(m);
    } else {
      host.textContent = '';
      view = new CaptureRenderer(m);
      host.appendChild(view.node);
    }
  };
  draw();
  model.on('change:capture', draw);
  return () => {
    model.off('change:capture', draw);
    view?.dispose();
  };
}

/** The side panel's last capture (streamed on capture_done, refreshed as the graph replays). */
export class CaptureDock {
  readonly node: HTMLDivElement;
  renderer: CaptureRenderer | null = null;
  count = 0;
  private title: HTMLSpanElement | null = null;

  constructor() {
    injectCaptureStyle();
    this.node = el('div', 'tapelab-panel-capture');
    this.node.style.display = 'none';
  }

  show(model: CaptureModel, update = false): void {
    if (update && this.renderer) {
      this.renderer.setModel(model);
      this.node.dataset.replays = String(model.timing?.replays ?? 0);
      return;
    }
    this.count++;
    this.node.textContent = '';
    this.node.style.display = '';
    const head = el('div', 'tapelab-panel-capture-head');
    this.title = el('span', '', `capture ${this.count}: ${model.title || 'captured graph'}`);
    head.appendChild(this.title);
    const close = el('button', '', '×');
    close.title = 'hide the capture';
    close.addEventListener('click', () => this.clear());
    head.appendChild(close);
    this.renderer?.dispose();
    this.renderer = new CaptureRenderer(model, { compact: true });
    this.node.append(head, this.renderer.node);
    this.node.dataset.captures = String(this.count);
    this.node.dataset.replays = String(model.timing?.replays ?? 0);
  }

  clear(): void {
    this.renderer?.dispose();
    this.renderer = null;
    this.node.textContent = '';
    this.node.style.display = 'none';
  }
}
