/**
 * The profile renderer (tapelab.widgets.ProfileView, the panel's profile dock, the mime renderer):
 * a summary line, a timeline (wheel to zoom, drag to pan, double-click to reset; one track per
 * range/forward/backward/module group, nested events stacked by depth), a sortable op table,
 * the memory timeline with the ops that allocated, and time per module (expandable).
 *
 * Every user string (op, module, range names) goes into the DOM through textContent.
 */
import { el, svg } from './format';
import type { GraphStore } from './store';
import type { GraphView } from './view';
import { Fact, onSelection, publishSelection, SelectionKey, viewId } from './selection';

export const PROFILE_MIME = 'application/vnd.tapelab.profile+json';

export interface PEvent {
  id: number;
  name: string;
  kind: 'op' | 'backward' | 'range' | 'step' | 'module';
  phase: string;
  lane: number;
  start_us: number;
  dur_us: number;
  self_us: number;
  parent: number | null;
  module: string;
  seq: number;
  input_shapes: number[][];
  shape: number[];
  dtype: string;
  bytes: number;
  mem_total: number;
  flops: number;
  track: number;
  depth: number;
  device?: string;
  device_us?: number;
  device_total_us?: number;
}

export interface PTrack { id: number; group: string; lane: number; label: string; depth: number; count: number }

export interface PRow {
  name: string;
  kind: string;
  module: string;
  count: number;
  cpu_time_total_us: number;
  self_cpu_time_total_us: number;
  cpu_time_avg_us: number;
  cpu_memory_usage: number;
  self_cpu_memory_usage: number;
  flops: number;
  device_time_total_us?: number;
  self_device_time_total_us?: number;
  phases: string[];
}

export interface PModule {
  path: string;
  name: string;
  forward_us: number;
  backward_us: number;
  total_us: number;
  self_us: number;
  calls: number;
  ops: { name: string; count: number; total_us: number; forward_us: number; backward_us: number }[];
  children: PModule[];
}

export interface ProfileModel {
  title?: string;
  duration_us: number;
  events: PEvent[];
  tracks: PTrack[];
  averages: PRow[];
  memory: { ts_us: number; bytes: number; allocated: number; name: string }[];
  peak_bytes: number;
  module_tree: PModule;
  totals: { wall_us: number; forward_us: number; backward_us: number; op_self_us: number; ops: number;
    backward_nodes: number; ranges: number; events: number };
  top_alloc: { id: number; name: string; bytes: number; start_us: number; module: string; shape: number[] }[];
  meta: { events_sent: number; events_total: number; truncated: boolean };
  dropped?: { total: number; notice: string };
}

export interface Selection { type: 'select'; id: number; seq: number; name: string; kind: string; phase: string; module: string }

export function fmtUs(us: number): string {
  if (!us) {
    return '0';
  }
  return us < 1e3 ? `${us.toFixed(1)} µs` : us < 1e6 ? `${(us / 1e3).toFixed(2)} ms` : `${(us / 1e6).toFixed(2)} s`;
}

export function fmtBytes(b: number): string {
  const a = Math.abs(b);
  return a < 1024 ? `${b} B` : a < 1 << 20 ? `${(b / 1024).toFixed(1)} KB` : a < 1 << 30 ? `${(b / (1 << 20)).toFixed(1)} MB` : `${(b / (1 << 30)).toFixed(2)} GB`;
}

const CSS = `
.tapelab-profile { font: 12px var(--jp-ui-font-family, system-ui, sans-serif); color: var(--jp-ui-font-color1, #1f2937); border: 1px solid var(--jp-border-color2, #e5e7eb); border-radius: 4px; display: flex; flex-direction: column; gap: 6px; padding: 6px; background: var(--jp-layout-color0, #fff); }
.tapelab-prof-head { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
.tapelab-prof-head b { font-size: 13px; }
.tapelab-prof-head button { font: inherit; padding: 0 6px; cursor: pointer; }
.tapelab-prof-note { color: #b45309; }
.tapelab-prof-sec { color: var(--jp-ui-font-color2, #6b7280); font-weight: 600; margin: 2px 0; }
.tapelab-prof-timeline { position: relative; overflow: hidden; cursor: grab; border: 1px solid var(--jp-border-color3, #f1f5f9); }
.tapelab-prof-timeline svg, .tapelab-prof-memory svg { display: block; user-select: none; }
.tapelab-prof-timeline text { font-size: 10px; pointer-events: none; }
.tapelab-prof-timeline .tapelab-lane-label { fill: #475569; font-weight: 600; }
.tapelab-prof-timeline .tapelab-ev { cursor: pointer; }
.tapelab-prof-timeline .tapelab-ev rect { stroke: rgba(0,0,0,.25); stroke-width: .5; }
.tapelab-ev.tapelab-k-op rect { fill: #93c5fd; }
.tapelab-ev.tapelab-k-op.tapelab-bwd rect { fill: #fdba74; }
.tapelab-ev.tapelab-k-backward rect { fill: #fb923c; }
.tapelab-ev.tapelab-k-range rect { fill: #86efac; }
.tapelab-ev.tapelab-k-step rect { fill: #cbd5e1; }
.tapelab-ev.tapelab-k-module rect { fill: #c4b5fd; }
.tapelab-ev.tapelab-hl rect { stroke: #dc2626; stroke-width: 1.5; }
.tapelab-ev.tapelab-sel rect { stroke: #111827; stroke-width: 2.5; }
.tapelab-prof-grid { display: grid; grid-template-columns: minmax(320px, 1.2fr) minmax(280px, 1fr); gap: 8px; align-items: start; }
.tapelab-prof-tablewrap { max-height: 300px; overflow: auto; border: 1px solid var(--jp-border-color3, #f1f5f9); }
.tapelab-prof-table { border-collapse: collapse; width: 100%; font-size: 11.5px; }
.tapelab-prof-table th { position: sticky; top: 0; background: var(--jp-layout-color2, #f1f5f9); cursor: pointer; text-align: right; padding: 2px 6px; white-space: nowrap; }
.tapelab-prof-table th:first-child, .tapelab-prof-table td:first-child { text-align: left; }
.tapelab-prof-table td { text-align: right; padding: 1px 6px; white-space: nowrap; border-top: 1px solid var(--jp-border-color3, #f1f5f9); }
.tapelab-prof-table tr.tapelab-row-sel td { background: #fef3c7; }
.tapelab-prof-table tbody tr { cursor: pointer; }
.tapelab-prof-table tbody tr:hover td { background: #eff6ff; }
.tapelab-prof-bar { display: inline-block; height: 6px; background: #60a5fa; margin-right: 4px; vertical-align: middle; }
.tapelab-prof-memory { border: 1px solid var(--jp-border-color3, #f1f5f9); position: relative; }
.tapelab-prof-memory .tapelab-mem-line { fill: rgba(124,58,237,.15); stroke: #7c3aed; stroke-width: 1.2; }
.tapelab-prof-memory text { font-size: 10px; fill: #475569; }
.tapelab-prof-alloc { font-size: 11px; margin: 2px 0 0 0; padding-left: 16px; }
.tapelab-prof-alloc li { cursor: pointer; }
.tapelab-prof-modules { font-size: 11.5px; max-height: 260px; overflow: auto; }
.tapelab-mod-row { display: flex; gap: 6px; align-items: center; cursor: pointer; padding: 1px 0; white-space: nowrap; }
.tapelab-mod-row .tapelab-mod-bar { height: 8px; display: inline-flex; min-width: 1px; }
.tapelab-mod-row .tapelab-mod-f { background: #60a5fa; height: 8px; }
.tapelab-mod-row .tapelab-mod-b { background: #fb923c; height: 8px; }
.tapelab-mod-op { color: var(--jp-ui-font-color2, #6b7280); white-space: nowrap; }
.tapelab-prof-card { font-size: 11.5px; border: 1px solid #94a3b8; border-radius: 4px; padding: 4px 8px; background: var(--jp-layout-color1, #fff); display: none; }
.tapelab-prof-card .tapelab-k { color: #6b7280; margin-right: 4px; }
.tapelab-monitor { font: 12px var(--jp-ui-font-family, system-ui, sans-serif); border: 1px solid var(--jp-border-color2, #e5e7eb); border-radius: 4px; padding: 6px; background: var(--jp-layout-color0, #fff); }
.tapelab-monitor-head { display: flex; gap: 12px; flex-wrap: wrap; margin-bottom: 4px; }
.tapelab-monitor-charts { display: flex; gap: 8px; flex-wrap: wrap; }
.tapelab-monitor-chart text { font-size: 10px; fill: #475569; }
.tapelab-monitor-chart .tapelab-curve { fill: none; stroke: #2563eb; stroke-width: 1.5; }
.tapelab-monitor-chart.tapelab-steptime .tapelab-curve { stroke: #6b7280; }
.tapelab-panel-profile { border-top: 2px solid var(--jp-border-color2, #e5e7eb); overflow: auto; max-height: 55%; flex: 0 0 auto; }
.tapelab-panel-profile-head { display: flex; justify-content: space-between; padding: 2px 6px; font-weight: 600; }
`;

export function injectProfileStyle(doc: Document = document): void {
  if (doc.getElementById('tapelab-profile-style')) {
    return;
  }
  const s = doc.createElement('style');
  s.id = 'tapelab-profile-style';
  s.textContent = CSS;
  doc.head.appendChild(s);
}

const LABEL_W = 78;
const ROW_H = 16;
const AXIS_H = 16;
const MAX_RECTS = 6000;

type SortKey = keyof PRow | 'self_pct';

export interface ProfileOptions {
  onSelect?: (sel: Selection) => void;
  compact?: boolean;
}

export class ProfileRenderer {
  readonly node: HTMLDivElement;
  model: ProfileModel;
  private opts: ProfileOptions;
  private head: HTMLDivElement;
  private timeline: HTMLDivElement;
  private memory: HTMLDivElement;
  private tableBody: HTMLTableSectionElement;
  private tableHead: HTMLTableSectionElement;
  private modules: HTMLDivElement;
  private allocList: HTMLOListElement;
  private card: HTMLDivElement;
  private kindFilter: HTMLSelectElement;
  t0 = 0;
  t1 = 1;
  private sortKey: SortKey = 'self_cpu_time_total_us';
  private sortDesc = true;
  private selected: number | null = null;
  private highlight: string | null = null;
  private expanded = new Set<string>(['']);
  private frame = 0;
  private resize: ResizeObserver | null = null;
  private readonly viewId = viewId('profile');
  private unsubSelection: () => void = () => undefined;

  constructor(model: ProfileModel, opts: ProfileOptions = {}) {
    injectProfileStyle();
    this.model = model;
    this.opts = opts;
    this.node = el('div', 'tapelab-profile');
    this.head = el('div', 'tapelab-prof-head');
    this.timeline = el('div', 'tapelab-prof-timeline');
    this.card = el('div', 'tapelab-prof-card');
    const grid = el('div', 'tapelab-prof-grid');
    const left = el('div');
    const right = el('div');
    const tableTools = el('div', 'tapelab-prof-head');
    tableTools.appendChild(el('span', 'tapelab-prof-sec', 'ops'));
    this.kindFilter = el('select', 'tapelab-prof-kind');
    for (const k of ['op', 'backward', 'range', 'module', 'all']) {
      const o = el('option', '', k === 'op' ? 'ops' : k === 'all' ? 'everything' : k === 'backward' ? 'backward nodes' : k + 's');
      o.value = k;
      this.kindFilter.appendChild(o);
    }
    this.kindFilter.addEventListener('change', () => this.drawTable());
    tableTools.appendChild(this.kindFilter);
    left.appendChild(tableTools);
    const wrap = el('div', 'tapelab-prof-tablewrap');
    const table = el('table', 'tapelab-prof-table');
    this.tableHead = el('thead');
    this.tableBody = el('tbody');
    table.append(this.tableHead, this.tableBody);
    wrap.appendChild(table);
    left.appendChild(wrap);
    right.appendChild(el('div', 'tapelab-prof-sec', 'memory (estimated)'));
    this.memory = el('div', 'tapelab-prof-memory');
    right.appendChild(this.memory);
    this.allocList = el('ol', 'tapelab-prof-alloc');
    right.appendChild(this.allocList);
    right.appendChild(el('div', 'tapelab-prof-sec', 'time per module'));
    this.modules = el('div', 'tapelab-prof-modules');
    right.appendChild(this.modules);
    grid.append(left, right);
    this.node.append(this.head, el('div', 'tapelab-prof-sec', 'timeline'), this.timeline, this.card, grid);
    this.bindTimeline();
    if (typeof ResizeObserver !== 'undefined') {
      this.resize = new ResizeObserver(() => this.schedule());
      this.resize.observe(this.node);
    }
    this.setModel(model);
    this.unsubSelection = onSelection(this.viewId, key => this.selectFromBus(key), key => this.describe(key));
  }

  setModel(model: ProfileModel): void {
    this.model = model;
    this.t0 = 0;
    this.t1 = Math.max(model.duration_us || 0, ...model.events.map(e => e.start_us + e.dur_us), 1);
    this.selected = null;
    this.highlight = null;
    this.node.dataset.events = String(model.events.length);
    this.node.dataset.ops = String(model.totals.ops);
    this.drawHead();
    this.drawTable();
    this.drawModules();
    this.drawAllocs();
    this.draw();
  }

  dispose(): void {
    this.unsubSelection();
    this.resize?.disconnect();
    cancelAnimationFrame(this.frame);
  }

  // ------------------------------------------------------------------ head
  private drawHead(): void {
    const m = this.model;
    const t = m.totals;
    this.head.textContent = '';
    this.head.appendChild(el('b', '', m.title || 'profile'));
    this.head.appendChild(el('span', 'tapelab-prof-sum',
      `wall ${fmtUs(t.wall_us)} · forward ops ${fmtUs(t.forward_us)} · backward ${fmtUs(t.backward_us)} · ` +
      `${t.ops} ops · ${t.backward_nodes} backward nodes · peak ${fmtBytes(m.peak_bytes || 0)}`));
    const btn = (label: string, title: string, fn: () => void, cls: string) => {
      const b = el('button', cls, label);
      b.title = title;
      b.addEventListener('click', fn);
      this.head.appendChild(b);
    };
    btn('+', 'zoom in', () => this.zoom(0.5, (this.t0 + this.t1) / 2), 'tapelab-zoom-in');
    btn('−', 'zoom out', () => this.zoom(2, (this.t0 + this.t1) / 2), 'tapelab-zoom-out');
    btn('reset', 'show the whole profile', () => this.reset(), 'tapelab-zoom-reset');
    if (m.meta && m.meta.truncated) {
      this.head.appendChild(el('span', 'tapelab-prof-note', `showing the ${m.meta.events_sent} longest of ${m.meta.events_total} events`));
    }
    if (m.dropped && m.dropped.total) {
      this.head.appendChild(el('span', 'tapelab-prof-note', m.dropped.notice));
    }
  }

  // ------------------------------------------------------------------ timeline
  private width(): number {
    const w = this.node.clientWidth; // 0 until attached: draw at a default width, redrawn on resize
    return w > 60 ? Math.max(w - 14, 280) : 900;
  }

  private x(t: number, w: number): number {
    return LABEL_W + ((t - this.t0) / (this.t1 - this.t0)) * (w - LABEL_W);
  }

  zoom(factor: number, at: number): void {
    const full = Math.max(this.model.duration_us, 1);
    const span = Math.min(Math.max((this.t1 - this.t0) * factor, 0.5), full * 1.05);
    const f = (at - this.t0) / (this.t1 - this.t0);
    this.t0 = Math.max(at - f * span, -full * 0.05);
    this.t1 = this.t0 + span;
    this.schedule();
  }

  reset(): void {
    this.t0 = 0;
    this.t1 = Math.max(this.model.duration_us, 1);
    this.schedule();
  }

  private bindTimeline(): void {
    const tl = this.timeline;
    tl.addEventListener('wheel', ev => {
      ev.preventDefault();
      const w = this.width();
      const r = tl.getBoundingClientRect();
      const at = this.t0 + ((ev.clientX - r.left - LABEL_W) / (w - LABEL_W)) * (this.t1 - this.t0);
      this.zoom(Math.exp(ev.deltaY * 0.002), at);
    }, { passive: false });
    let drag: { x: number; t0: number; t1: number; moved: boolean } | null = null;
    tl.addEventListener('pointerdown', ev => {
      drag = { x: ev.clientX, t0: this.t0, t1: this.t1, moved: false };
      tl.style.cursor = 'grabbing';
    });
    window.addEventListener('pointermove', ev => {
      if (!drag) {
        return;
      }
      const dx = ev.clientX - drag.x;
      if (Math.abs(dx) > 2) {
        drag.moved = true;
      }
      const dt = (-dx / (this.width() - LABEL_W)) * (drag.t1 - drag.t0);
      this.t0 = drag.t0 + dt;
      this.t1 = drag.t1 + dt;
      this.schedule();
    });
    window.addEventListener('pointerup', () => {
      if (drag) {
        tl.dataset.dragged = String(drag.moved);
        drag = null;
        tl.style.cursor = '';
      }
    });
    tl.addEventListener('dblclick', () => this.reset());
  }

  private schedule(): void {
    if (this.frame) {
      return;
    }
    const raf = typeof requestAnimationFrame !== 'undefined' ? requestAnimationFrame : (f: FrameRequestCallback) => setTimeout(f, 16) as unknown as number;
    this.frame = raf(() => {
      this.frame = 0;
      this.draw();
    });
  }

  draw(): void {
    this.drawTimeline();
    this.drawMemory();
  }

  private drawTimeline(): void {
    const m = this.model;
    const w = this.width();
    const tops: number[] = [];
    let y = AXIS_H;
    for (const t of m.tracks) {
      tops.push(y);
      y += Math.max(1, t.depth) * ROW_H + 6;
    }
    const h = y + 2;
    const s = svg('svg', { width: w, height: h, class: 'tapelab-prof-svg' });
    // axis
    const span = this.t1 - this.t0;
    const step = niceStep(span / 8);
    for (let t = Math.ceil(this.t0 / step) * step; t <= this.t1; t += step) {
      const x = this.x(t, w);
      s.appendChild(svg('line', { x1: x, x2: x, y1: AXIS_H - 4, y2: h, stroke: '#f1f5f9' }));
      const lbl = svg('text', { x: x + 2, y: 10 });
      lbl.textContent = fmtUs(t);
      s.appendChild(lbl);
    }
    m.tracks.forEach((t, i) => {
      s.appendChild(svg('line', { x1: 0, x2: w, y1: tops[i] - 3, y2: tops[i] - 3, stroke: '#e2e8f0' }));
      const lbl = svg('text', { x: 4, y: tops[i] + 11, class: 'tapelab-lane-label' });
      lbl.textContent = t.label;
      s.appendChild(lbl);
    });
    const vis = m.events.filter(e => e.start_us + e.dur_us >= this.t0 && e.start_us <= this.t1);
    const drawn = vis.length > MAX_RECTS ? [...vis].sort((a, b) => b.dur_us - a.dur_us).slice(0, MAX_RECTS) : vis;
    const layer = svg('g');
    for (const e of drawn) {
      const x0 = Math.max(this.x(e.start_us, w), LABEL_W);
      const x1 = Math.min(this.x(e.start_us + e.dur_us, w), w);
      if (x1 < LABEL_W) {
        continue;
      }
      const ww = Math.max(x1 - x0, 0.8);
      let cls = `tapelab-ev tapelab-k-${e.kind}`;
      if (e.phase === 'backward') {
        cls += ' tapelab-bwd';
      }
      if (this.highlight !== null && e.name === this.highlight) {
        cls += ' tapelab-hl';
      }
      if (this.selected === e.id) {
        cls += ' tapelab-sel';
      }
      const g = svg('g', { class: cls, 'data-id': e.id, 'data-kind': e.kind, 'data-track': m.tracks[e.track]?.group ?? '' });
      const top = tops[e.track] + e.depth * ROW_H;
      g.appendChild(svg('rect', { x: x0, y: top, width: ww, height: ROW_H - 2, rx: 2 }));
      if (ww > 30) {
        const txt = svg('text', { x: x0 + 3, y: top + 11 });
        txt.textContent = clip(e.name, Math.floor(ww / 6));
        g.appendChild(txt);
      }
      const title = svg('title');
      title.textContent = `${e.name} · ${fmtUs(e.dur_us)} (self ${fmtUs(e.self_us)})` + (e.module ? ` · ${e.module}` : '');
      g.appendChild(title);
      g.addEventListener('click', ev => {
        ev.stopPropagation();
        if (this.timeline.dataset.dragged === 'true') {
          return;
        }
        this.select(e.id);
      });
      layer.appendChild(g);
    }
    s.appendChild(layer);
    this.timeline.textContent = '';
    this.timeline.appendChild(s);
    this.timeline.dataset.drawn = String(drawn.length);
    this.timeline.dataset.t0 = String(this.t0);
    this.timeline.dataset.t1 = String(this.t1);
  }

  // ------------------------------------------------------------------ selection
  select(id: number, publish = true): void {
    const e = this.model.events[id];
    if (!e) {
      return;
    }
    this.selected = id;
    this.highlight = e.name;
    this.showCard(e);
    this.drawTable();
    this.schedule();
    if (publish && (e.kind === 'op' || e.kind === 'backward')) {
      // the tape, FX and capture views open on the page highlight the same op
      publishSelection({
        seq: e.seq >= 0 ? e.seq : null, phase: e.phase === 'backward' ? 'backward' : 'forward',
        module: e.module || '', op: e.name, name: e.name, origin: this.viewId
      }, this.viewId);
    }
    if (publish && this.opts.onSelect) {
      this.opts.onSelect({ type: 'select', id: e.id, seq: e.seq, name: e.name, kind: e.kind, phase: e.phase, module: e.module });
    }
  }

  /** The op event a selection elsewhere names: by tape seq, else by module and op name. */
  private eventFor(key: SelectionKey): PEvent | undefined {
    const back = key.phase === 'backward';
    const ops = this.model.events.filter(e => (e.kind === 'op' || e.kind === 'backward') && (e.phase === 'backward') === back);
    const same = key.seq !== null ? ops.find(e => e.seq === key.seq) : undefined; // seqs are global
    return same ?? ops.find(e => e.module === key.module && e.name === key.op) ?? ops.find(e => !!key.module && e.module === key.module);
  }

  private selectFromBus(key: SelectionKey | null): void {
    const e = key ? this.eventFor(key) : undefined;
    if (e) {
      this.select(e.id, false);
    }
  }

  private describe(key: SelectionKey): Fact[] {
    const e = this.eventFor(key);
    if (!e) {
      return [];
    }
    return [['profile time', `${fmtUs(e.dur_us)} (self ${fmtUs(e.self_us)})`],
      ['memory', e.bytes ? `${fmtBytes(e.bytes)} allocated` : ''], ['flops', e.flops ? String(e.flops) : '']];
  }

  private showCard(e: PEvent): void {
    const c = this.card;
    c.textContent = '';
    c.style.display = 'block';
    const row = (k: string, v: string) => {
      if (!v) {
        return;
      }
      const r = el('span');
      r.appendChild(el('span', 'tapelab-k', k));
      r.appendChild(document.createTextNode(v + '   '));
      c.appendChild(r);
    };
    c.appendChild(el('b', '', e.name + '  '));
    row('kind', e.kind + (e.phase ? ` (${e.phase})` : ''));
    row('module', e.module);
    row('start', fmtUs(e.start_us));
    row('time', fmtUs(e.dur_us));
    row('self', fmtUs(e.self_us));
    row(e.device || 'device', e.device_us ? fmtUs(e.device_us) : '');
    row('shape', e.shape && e.shape.length ? '(' + e.shape.join(', ') + ')' : '');
    row('inputs', (e.input_shapes || []).map(s => '(' + s.join(', ') + ')').join(' '));
    row('dtype', e.dtype);
    row('allocated', e.bytes ? fmtBytes(e.bytes) : '');
    row('flops', e.flops ? String(e.flops) : '');
    row('seq', e.seq >= 0 ? String(e.seq) : '');
    this.node.dataset.selected = String(e.id);
  }

  // ------------------------------------------------------------------ table
  private drawTable(): void {
    // device (CUDA event) time columns only when the profile measured some
    const device = this.model.averages.some(r => r.self_device_time_total_us);
    const cols: [SortKey, string][] = [['name', 'name'], ['kind', 'kind'], ['count', 'calls'], ['cpu_time_total_us', 'total'],
      ['self_cpu_time_total_us', 'self'], ['cpu_time_avg_us', 'avg'], ['self_pct', 'self %'],
      ...(device ? [['self_device_time_total_us', 'self CUDA'], ['device_time_total_us', 'CUDA total']] as [SortKey, string][] : []),
      ['self_cpu_memory_usage', 'memory'], ['flops', 'FLOPs']];
    this.tableHead.textContent = '';
    const hr = el('tr');
    for (const [key, label] of cols) {
      const th = el('th', '', label + (key === this.sortKey ? (this.sortDesc ? ' ▾' : ' ▴') : ''));
      th.dataset.key = key;
      th.addEventListener('click', () => {
        if (this.sortKey === key) {
          this.sortDesc = !this.sortDesc;
        } else {
          this.sortKey = key;
          this.sortDesc = key !== 'name' && key !== 'kind';
        }
        this.drawTable();
      });
      hr.appendChild(th);
    }
    this.tableHead.appendChild(hr);
    const kind = this.kindFilter.value;
    const total = this.model.totals.op_self_us || 1;
    const rows = this.model.averages.filter(r => kind === 'all' || r.kind === kind || (kind === 'range' && r.kind === 'step'));
    const val = (r: PRow, k: SortKey): number | string => (k === 'self_pct' ? r.self_cpu_time_total_us : ((r[k] ?? 0) as number | string));
    rows.sort((a, b) => {
      const va = val(a, this.sortKey);
      const vb = val(b, this.sortKey);
      const c = typeof va === 'string' ? String(va).localeCompare(String(vb)) : (va as number) - (vb as number);
      return this.sortDesc ? -c : c;
    });
    const maxSelf = Math.max(...rows.map(r => r.self_cpu_time_total_us), 1);
    this.tableBody.textContent = '';
    for (const r of rows) {
      const tr = el('tr');
      tr.dataset.name = r.name;
      if (r.name === this.highlight) {
        tr.className = 'tapelab-row-sel';
      }
      const name = el('td');
      const bar = el('span', 'tapelab-prof-bar');
      bar.style.width = `${Math.max(1, (30 * r.self_cpu_time_total_us) / maxSelf)}px`;
      name.append(bar, document.createTextNode(r.name));
      tr.appendChild(name);
      for (const v of [r.kind, String(r.count), fmtUs(r.cpu_time_total_us), fmtUs(r.self_cpu_time_total_us), fmtUs(r.cpu_time_avg_us),
        r.kind === 'op' ? `${((100 * r.self_cpu_time_total_us) / total).toFixed(1)}%` : '',
        ...(device ? [fmtUs(r.self_device_time_total_us || 0), fmtUs(r.device_time_total_us || 0)] : []),
        r.self_cpu_memory_usage ? fmtBytes(r.self_cpu_memory_usage) : '', r.flops ? fmtFlops(r.flops) : '']) {
        tr.appendChild(el('td', '', v));
      }
      tr.addEventListener('click', () => {
        // select the longest event of that name (it shows on the timeline and in the tape view)
        let best: PEvent | null = null;
        for (const e of this.model.events) {
          if (e.name === r.name && (!best || e.dur_us > best.dur_us)) {
            best = e;
          }
        }
        if (best) {
          this.select(best.id);
        }
      });
      this.tableBody.appendChild(tr);
    }
    this.tableBody.parentElement!.dataset.rows = String(rows.length);
  }

  // ------------------------------------------------------------------ memory
  private drawMemory(): void {
    const mem = this.model.memory || [];
    const w = Math.max(Math.floor(this.memory.clientWidth || 320), 240);
    const H = 120;
    const s = svg('svg', { width: w, height: H + 16, class: 'tapelab-mem-svg' });
    const peak = Math.max(this.model.peak_bytes || 0, ...mem.map(p => p.allocated), 1);
    const L = 44;
    const xs = (t: number) => L + ((t - this.t0) / (this.t1 - this.t0)) * (w - L - 4);
    const ys = (b: number) => 4 + (1 - b / peak) * (H - 8);
    let d = `M ${xs(this.t0)} ${ys(0)}`;
    let prev = 0;
    for (const p of mem) {
      const x = Math.min(Math.max(xs(p.ts_us), L), w);
      d += ` L ${x} ${ys(prev)} L ${x} ${ys(p.allocated)}`;
      prev = p.allocated;
    }
    d += ` L ${w} ${ys(prev)} L ${w} ${ys(0)} Z`;
    s.appendChild(svg('path', { d, class: 'tapelab-mem-line' }));
    for (const [b, label] of [[peak, fmtBytes(peak)], [0, '0']] as [number, string][]) {
      const t = svg('text', { x: 2, y: ys(b) + 4 });
      t.textContent = label;
      s.appendChild(t);
    }
    // the biggest allocations, marked where they happened
    for (const a of this.model.top_alloc || []) {
      const after = mem.find(p => p.ts_us >= a.start_us); // the op's allocation lands when it ends
      const x = xs(after ? after.ts_us : a.start_us);
      if (x < L || x > w) {
        continue;
      }
      const c = svg('circle', { cx: x, cy: ys(after ? after.allocated : 0), r: 3, fill: '#dc2626', class: 'tapelab-mem-alloc', 'data-id': a.id });
      const title = svg('title');
      title.textContent = `${a.name} allocated ${fmtBytes(a.bytes)}` + (a.module ? ` in ${a.module}` : '');
      c.appendChild(title);
      c.addEventListener('click', () => this.select(a.id));
      s.appendChild(c);
    }
    const lbl = svg('text', { x: L, y: H + 13 });
    lbl.textContent = `${fmtUs(this.t0)} … ${fmtUs(this.t1)} · peak ${fmtBytes(this.model.peak_bytes || 0)}`;
    s.appendChild(lbl);
    this.memory.textContent = '';
    this.memory.appendChild(s);
    this.memory.dataset.points = String(mem.length);
  }

  private drawAllocs(): void {
    this.allocList.textContent = '';
    for (const a of (this.model.top_alloc || []).slice(0, 5)) {
      const li = el('li', '', `${a.name} ${fmtBytes(a.bytes)}` + (a.shape && a.shape.length ? ` (${a.shape.join(', ')})` : '') + (a.module ? ` · ${a.module}` : '') + ` @ ${fmtUs(a.start_us)}`);
      li.addEventListener('click', () => this.select(a.id));
      this.allocList.appendChild(li);
    }
  }

  // ------------------------------------------------------------------ modules
  private drawModules(): void {
    const root = this.model.module_tree;
    this.modules.textContent = '';
    if (!root) {
      return;
    }
    const scale = Math.max(root.total_us, 1);
    const add = (n: PModule, depth: number) => {
      const open = this.expanded.has(n.path);
      const row = el('div', 'tapelab-mod-row');
      row.dataset.path = n.path;
      row.style.paddingLeft = `${depth * 12}px`;
      const has = n.children.length > 0 || n.ops.length > 0;
      row.appendChild(el('span', '', has ? (open ? '▾' : '▸') : ' '));
      row.appendChild(el('span', '', n.path || n.name));
      const bar = el('span', 'tapelab-mod-bar');
      const f = el('span', 'tapelab-mod-f');
      f.style.width = `${(80 * n.forward_us) / scale}px`;
      const b = el('span', 'tapelab-mod-b');
      b.style.width = `${(80 * n.backward_us) / scale}px`;
      bar.append(f, b);
      row.appendChild(bar);
      row.appendChild(el('span', 'tapelab-mod-op', `fwd ${fmtUs(n.forward_us)} · bwd ${fmtUs(n.backward_us)}` + (n.calls > 1 ? ` · ${n.calls} calls` : '')));
      row.addEventListener('click', () => {
        if (open) {
          this.expanded.delete(n.path);
        } else {
          this.expanded.add(n.path);
        }
        this.drawModules();
      });
      this.modules.appendChild(row);
      if (open) {
        for (const c of n.children) {
          add(c, depth + 1);
        }
        for (const o of n.ops.slice(0, 12)) {
          const r = el('div', 'tapelab-mod-op', `${o.name} ×${o.count} · ${fmtUs(o.total_us)}`);
          r.style.paddingLeft = `${(depth + 1) * 12 + 10}px`;
          this.modules.appendChild(r);
        }
      }
    };
    add(root, 0);
  }
}

function niceStep(raw: number): number {
  const p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-3))));
  const f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

function fmtFlops(f: number): string {
  return f < 1e3 ? String(f) : f < 1e6 ? `${(f / 1e3).toFixed(1)} K` : f < 1e9 ? `${(f / 1e6).toFixed(1)} M` : `${(f / 1e9).toFixed(2)} G`;
}

function clip(s: string, n: number): string {
  return s.length > n ? s.slice(0, Math.max(n - 1, 1)) + '…' : s;
}

/** Show the node of a tape view whose forward op (or backward node) has this `seq`: expand its
 *  module groups, then pin its card once it is drawn. Returns whether such a node exists. */
export function selectInTape(view: GraphView, store: GraphStore, seq: number, phase?: string): boolean {
  const n = store.nodes.find(x => (phase === 'backward' ? x.kind === 'backward' && x.forward_seq === seq : x.kind === 'forward' && x.seq === seq));
  if (!n) {
    return false;
  }
  for (let g = n.group; g; g = store.groups.get(g)?.parent ?? null) {
    if (!store.isExpanded(g)) {
      store.setExpanded(g, true);
    }
  }
  let tries = 0;
  const pin = () => {
    const u = view.node.querySelector(`.tapelab-unit[data-id="${CSS_escape(n.id)}"]`);
    if (u) {
      if (!u.classList.contains('tapelab-pinned')) {
        u.dispatchEvent(new MouseEvent('click', { bubbles: true }));
      }
      view.node.dataset.selectedSeq = String(seq);
    } else if (tries++ < 40) {
      setTimeout(pin, 50);
    }
  };
  pin();
  return true;
}

function CSS_escape(s: string): string {
  return s.replace(/["\\]/g, '\\$&');
}

/** A profile below the tape in the inspector panel, replaced by each new profile. */
export class ProfileDock {
  readonly node: HTMLDivElement;
  renderer: ProfileRenderer | null = null;
  count = 0;

  constructor() {
    injectProfileStyle();
    this.node = el('div', 'tapelab-panel-profile');
    this.node.style.display = 'none';
  }

  show(model: ProfileModel): void {
    this.count++;
    this.node.textContent = '';
    this.node.style.display = '';
    const head = el('div', 'tapelab-panel-profile-head');
    head.appendChild(el('span', '', `profile ${this.count}: ${model.title || ''}`));
    const close = el('button', '', '×');
    close.title = 'hide the profile';
    close.addEventListener('click', () => this.clear());
    head.appendChild(close);
    this.renderer?.dispose();
    this.renderer = new ProfileRenderer(model, { compact: true });
    this.node.append(head, this.renderer.node);
    this.node.dataset.profiles = String(this.count);
  }

  clear(): void {
    this.renderer?.dispose();
    this.renderer = null;
    this.node.textContent = '';
    this.node.style.display = 'none';
  }
}
