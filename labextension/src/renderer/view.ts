import { computeLayout, LayoutClient, LayoutInput, LayoutResult } from './layout';
import { countCrossings, countOverlaps } from './measure';
import { GvCluster, GvInput, GvResult } from './gvlayout';
import { graphvizLayout, GV_MAX_UNITS } from './gvclient';
import { Minimap } from './minimap';
import { BULK_UNITS, drawBulk, hitTest } from './bulk';
import { GraphStore, Unit, Visible } from './store';
import { describeSelection, Fact, matchNode, onSelection, publishSelection, SelectionKey, selectionKey, viewId } from './selection';
import { el, fmtShape, fmtSummary, fmtTime, svg } from './format';
import { injectStyle } from './style';
import { GNode } from './types';

const NODE_W = 128;
const NODE_H = 34;
const GROUP_W = 178;
const GROUP_H = 50;
/** Below this zoom the picture is an overview: boxes, group labels at a readable size, no shape lines. */
export const LOD_SCALE = 0.6;
/** On-screen size (px) of group and frame labels in the overview. */
export const LABEL_PX = 12;
const MIN_HEIGHT = 160;

export interface GraphViewOptions {
  fixedHeight?: boolean; // a notebook output (fixed height) rather than a panel (fills its parent)
  useWorker?: boolean;
  /** 'auto': Graphviz's dot once the graph is complete (not running), the incremental hand
   *  layout while it streams; 'hand': always the hand layout; 'dot': Graphviz whenever it can. */
  layout?: 'auto' | 'hand' | 'dot';
  /** The view's name on the selection bus ('tape', 'fx', 'capture', 'debugger'). */
  viewKind?: string;
  /** Called for every drawn unit (after each repaint): extra classes, texts or listeners. */
  decorate?: (u: Unit, g: SVGElement) => void;
  /** What this view knows of a node beyond the schema (a capture buffer, an FX opcode). */
  facts?: (n: GNode) => Fact[];
}

type Box = { x: number; y: number; w: number; h: number };

export interface LayoutMeasure {
  crossings: number;
  overlaps: number;
  width: number;
  height: number;
}

/**
 * Draws a GraphStore: pan and zoom, click a group to expand or collapse it, hover a node for
 * its card, click to pin the card, search by op or module name. Every string from the graph
 * goes into the DOM through textContent or setAttribute, never through innerHTML.
 */
export class GraphView {
  readonly node: HTMLDivElement;
  readonly store: GraphStore;
  readonly layouts: LayoutClient;
  private svgEl: SVGSVGElement;
  private viewport: SVGGElement;
  private edgeLayer: SVGGElement;
  private frameLayer: SVGGElement;
  private unitLayer: SVGGElement;
  private canvas: HTMLDivElement;
  private card: HTMLDivElement;
  private info: HTMLSpanElement;
  private searchInfo: HTMLSpanElement;
  private searchIdx = -1;
  private pendingReveal: string | null = null;
  private current: string | null = null;
  private userMoved = false;
  private frameBoxes = new Map<string, { x: number; y: number; w: number; h: number }>();
  private resizeObs: ResizeObserver | null = null;
  private tx = 20;
  private ty = 20;
  private scale = 1;
  private fitted = false;
  private vis: Visible = { units: [], edges: [] };
  private pos = new Map<string, { x: number; y: number; w: number; h: number }>();
  private seen = new Set<string>();
  private pinned: string | null = null;
  private scheduled = false;
  private running = false;
  private drawnVersion = -1;
  private unsubscribe: () => void;
  private decorate?: (u: Unit, g: SVGElement) => void;
  private facts?: (n: GNode) => Fact[];
  private layoutMode: 'auto' | 'hand' | 'dot';
  readonly viewKind: string;
  readonly viewId: string;
  private paths: (string | null)[] | null = null; // Graphviz's edge splines, per visible edge
  private gvFrames: Map<string, Box> | null = null; // Graphviz's cluster boxes, per group
  private minimap: Minimap;
  private bulk: HTMLCanvasElement; // many units are drawn here instead of as SVG elements
  private bulkOn = false;
  private bulkFrame = 0;
  private selected: string | null = null; // the node another view selected
  private unsubSelection: () => void;
  /** Milliseconds from a change of the store to the picture showing it (the last one). */
  lastRenderMs = 0;
  /** Which layout drew the picture ('dot' or 'hand') and how long Graphviz took (ms). */
  engine = 'hand';
  layoutMs = 0;

  constructor(store: GraphStore, opts: GraphViewOptions = {}) {
    injectStyle();
    this.store = store;
    this.decorate = opts.decorate;
    this.facts = opts.facts;
    this.layoutMode = opts.layout ?? 'auto';
    this.viewKind = opts.viewKind ?? 'tape';
    this.viewId = viewId(this.viewKind);
    this.layouts = new LayoutClient(opts.useWorker !== false);
    this.node = el('div', 'tapelab-graph' + (opts.fixedHeight ? ' tapelab-fixed' : ''));
    (this.node as unknown as { tapelabView: GraphView }).tapelabView = this; // for tests and the console
    const bar = el('div', 'tapelab-toolbar');
    const search = el('input', 'tapelab-search');
    search.type = 'search';
    search.placeholder = 'search op or module';
    search.title = 'Enter: next match (expands its group and pans to it), Shift+Enter: previous';
    search.addEventListener('input', () => {
      this.searchIdx = -1;
      this.current = null;
      delete this.node.dataset.current;
      store.setQuery(search.value);
    });
    search.addEventListener('keydown', ev => {
      if (ev.key === 'Enter') {
        ev.preventDefault();
        this.nextMatch(ev.shiftKey ? -1 : 1);
      }
    });
    this.searchInfo = el('span', 'tapelab-info tapelab-search-info');
    const button = (label: string, title: string, fn: () => void, cls: string) => {
      const b = el('button', cls, label);
      b.title = title;
      b.addEventListener('click', fn);
      bar.appendChild(b);
    };
    bar.appendChild(search);
    bar.appendChild(this.searchInfo);
    button('fit', 'fit the graph into view', () => this.fit(), 'tapelab-fit');
    button('expand all', 'expand every module group', () => store.expandAll(true), 'tapelab-expand-all');
    button('collapse all', 'collapse every module group', () => store.expandAll(false), 'tapelab-collapse-all');
    this.info = el('span', 'tapelab-info tapelab-meta');
    bar.appendChild(this.info);
    this.node.appendChild(bar);
    this.canvas = el('div', 'tapelab-canvas');
    this.canvas.tabIndex = 0; // clicked (focused), the wheel zooms; otherwise it scrolls the page
    this.canvas.title = 'drag to pan; Ctrl/⌘ + wheel to zoom (or click the graph first)';
    this.svgEl = svg('svg') as SVGSVGElement;
    this.viewport = svg('g', { class: 'tapelab-viewport' }) as SVGGElement;
    this.frameLayer = svg('g') as SVGGElement;
    this.edgeLayer = svg('g') as SVGGElement;
    this.unitLayer = svg('g') as SVGGElement;
    const defs = svg('defs');
    for (const [id, color] of [['tapelab-arrow', '#94a3b8'], ['tapelab-arrow-grad', '#f97316']]) {
      const m = svg('marker', { id, viewBox: '0 0 8 8', refX: 7, refY: 4, markerWidth: 7, markerHeight: 7, orient: 'auto' });
      m.appendChild(svg('path', { d: 'M0,0 L8,4 L0,8 z', fill: color }));
      defs.appendChild(m);
    }
    this.svgEl.appendChild(defs);
    this.viewport.append(this.frameLayer, this.edgeLayer, this.unitLayer);
    this.svgEl.appendChild(this.viewport);
    this.bulk = el('canvas', 'tapelab-bulk');
    this.canvas.append(this.bulk, this.svgEl);
    this.card = el('div', 'tapelab-card');
    this.canvas.appendChild(this.card);
    this.minimap = new Minimap((x, y) => this.centerOn(x, y));
    this.canvas.appendChild(this.minimap.node);
    this.node.appendChild(this.canvas);
    if (opts.fixedHeight) {
      this.node.appendChild(this.resizeHandle());
    }
    this.bindPanZoom();
    if (typeof ResizeObserver !== 'undefined') {
      let last = '';
      this.resizeObs = new ResizeObserver(() => {
        const r = this.canvas.getBoundingClientRect();
        const key = `${Math.round(r.width)}x${Math.round(r.height)}`;
        if (key === last || !r.width || !r.height) {
          return;
        }
        last = key;
        if (this.fitted && !this.userMoved) {
          this.fit(); // shown, resized, or a panel opened: fit again until the user pans or zooms
        } else {
          this.paint();
        }
      });
      this.resizeObs.observe(this.canvas);
    }
    this.unsubscribe = store.onChange(() => this.schedule());
    this.unsubSelection = onSelection(this.viewId, key => this.selectFromBus(key), key => this.describe(key));
    this.schedule();
  }

  dispose(): void {
    this.unsubscribe();
    this.unsubSelection();
    this.resizeObs?.disconnect();
    this.layouts.dispose();
    this.node.remove();
  }

  /** Mark the graph as being recorded right now (a cell is running). */
  setRunning(on: boolean): void {
    const finished = this.running && !on;
    this.running = on;
    if (finished && this.layoutMode === 'auto') {
      this.schedule(); // the cell finished: lay the whole graph out again with Graphviz
    }
    this.node.classList.toggle('tapelab-running', on);
    this.updateInfo();
  }

  schedule(): void {
    if (this.scheduled) {
      return;
    }
    this.scheduled = true;
    const t0 = performance.now();
    const run = () => {
      this.scheduled = false;
      void this.render(t0);
    };
    if (typeof requestAnimationFrame !== 'undefined' && document.visibilityState === 'visible') {
      requestAnimationFrame(run);
    } else {
      setTimeout(run, 0);
    }
  }

  private async render(t0: number): Promise<void> {
    const version = this.store.version;
    const tVis = performance.now();
    const vis = this.store.visible();
    const visMs = performance.now() - tVis;
    const input = this.layoutInput(vis);
    const useDot = (this.layoutMode === 'dot' || (this.layoutMode === 'auto' && !this.running)) &&
      vis.units.length > 0 && vis.units.length <= GV_MAX_UNITS;
    let res: LayoutResult | null = null;
    this.node.dataset.pending = 'true'; // a layout is on its way (Graphviz can take a second)
    if (useDot) {
      if (this.drawnVersion < 0) {
        // first picture: the hand layout now, Graphviz's when its worker answers
        const quick = await this.layouts.layout(input);
        if (version === this.store.version) {
          this.draw(vis, quick, 'hand');
          this.drawnVersion = version;
        }
      }
      const gv = await graphvizLayout(this.gvInput(vis, input));
      if (gv) {
        res = gv;
        this.layoutMs = gv.ms;
      }
    }
    const engine = res ? 'dot' : 'hand';
    const tLayout = performance.now();
    if (!res) {
      res = await this.layouts.layout(input);
    }
    const layoutMs = performance.now() - tLayout;
    if (version !== this.store.version) {
      this.schedule(); // a newer change arrived meanwhile: draw that one instead
      return;
    }
    // Graphviz places everything anew (the hand layout keeps earlier units where they were): a
    // picture the user has not panned or zoomed is fitted again
    const relayout = (engine === 'dot' || this.engine !== engine) && this.drawnVersion >= 0;
    const tDraw = performance.now();
    this.draw(vis, res, engine);
    if (relayout && !this.userMoved) {
      this.fit();
    }
    // where the time of the last picture went (ms): the scale test prints these
    this.node.dataset.timings = JSON.stringify({ visible: Math.round(visMs), layout: Math.round(layoutMs),
      dot: Math.round(this.layoutMs), draw: Math.round(performance.now() - tDraw) });
    this.drawnVersion = version;
    this.node.dataset.pending = 'false';
    this.lastRenderMs = performance.now() - t0;
    this.node.dataset.version = String(version);
    this.node.dataset.renderMs = this.lastRenderMs.toFixed(1);
  }

  /** The hand layout's input: the visible units' sizes, lanes and edges, by index. */
  private layoutInput(vis: Visible): LayoutInput {
    const input: LayoutInput = { ids: [], widths: [], heights: [], backward: [], anchors: [], edges: [] };
    const index = new Map<string, number>();
    vis.units.forEach((u, i) => index.set(u.id, i));
    for (const u of vis.units) {
      input.ids.push(u.id);
      input.widths.push(u.kind === 'group' ? GROUP_W : NODE_W);
      input.heights.push(u.kind === 'group' ? GROUP_H : NODE_H);
      input.backward.push(u.nodeKind === 'backward');
      input.anchors.push(u.anchor !== null ? index.get(u.anchor) ?? -1 : -1);
    }
    for (const e of vis.edges) {
      input.edges.push(index.get(e.source)!, index.get(e.target)!);
    }
    return input;
  }

  /** The Graphviz input: the hand layout's, plus a cluster per expanded group holding units. */
  private gvInput(vis: Visible, base: LayoutInput): GvInput {
    const clusters: GvCluster[] = [];
    const ci = new Map<string, number>();
    const clusterOf = (gid: string | null): number => {
      if (!gid) {
        return -1;
      }
      const known = ci.get(gid);
      if (known !== undefined) {
        return known;
      }
      const g = this.store.groups.get(gid);
      if (!g) {
        return -1; // a synthetic chunk of loose ops: no frame
      }
      const parent = clusterOf(g.parent);
      const k = clusters.length;
      clusters.push({ id: gid, label: '▾ ' + (g.path || g.label), parent });
      ci.set(gid, k);
      return k;
    };
    const cluster = vis.units.map(u => clusterOf(u.kind === 'group' ? u.group?.parent ?? null : u.node?.group ?? null));
    return { ...base, cluster, clusters, grad: vis.edges.map(e => e.kind === 'grad') };
  }

  private draw(vis: Visible, res: LayoutResult, engine: string): void {
    this.vis = vis;
    this.pos.clear();
    vis.units.forEach((u, i) => {
      this.pos.set(u.id, { x: res.x[i], y: res.y[i], w: (u.kind === 'group' ? GROUP_W : NODE_W), h: u.kind === 'group' ? GROUP_H : NODE_H });
    });
    const gv = res as Partial<GvResult>;
    this.paths = gv.paths ?? null;
    this.gvFrames = gv.frames ? new Map(gv.frames.map(f => [f.id, { x: f.x, y: f.y, w: f.w, h: f.h }])) : null;
    this.engine = engine;
    this.node.dataset.layout = engine;
    this.node.dataset.layoutMs = this.layoutMs.toFixed(1);
    this.minimap.setBoxes(vis.units.map(u => ({ r: this.pos.get(u.id)!, cls: u.nodeKind })));
    if (!this.fitted && vis.units.length) {
      this.fitted = true;
      this.fit(res);
    }
    this.paint();
    const d = this.node.dataset;
    d.units = String(vis.units.length);
    d.nodes = String(this.store.nodes.length);
    d.groups = String(vis.units.filter(u => u.kind === 'group').length);
    d.laidOut = String(res.count);
    this.updateInfo();
    this.updateSearchInfo();
    if (this.pendingReveal !== null) {
      const id = this.pendingReveal;
      this.pendingReveal = null;
      this.focusOn(id);
    }
  }

  private updateSearchInfo(): void {
    if (!this.store.query) {
      this.searchInfo.textContent = '';
      return;
    }
    const n = this.store.searchTargets().length;
    this.searchInfo.textContent = this.searchIdx >= 0 && n
      ? `${(this.searchIdx % n) + 1} of ${n}`
      : `${n} match${n === 1 ? '' : 'es'}` + (n ? ' (Enter: next)' : '');
    this.node.dataset.matches = String(n);
  }

  /** Search: go to the next (dir 1) or previous (-1) match, expanding its group and panning to it. */
  nextMatch(dir = 1): string | null {
    const targets = this.store.searchTargets();
    if (!targets.length) {
      this.updateSearchInfo();
      return null;
    }
    this.searchIdx = this.searchIdx < 0 ? (dir > 0 ? 0 : targets.length - 1)
      : (this.searchIdx + dir + targets.length) % targets.length;
    const id = targets[this.searchIdx];
    this.current = id;
    this.pendingReveal = id;
    this.node.dataset.current = id;
    this.store.reveal(id); // a change: the next draw pans to it
    return id;
  }

  /** Centre the unit or the frame of group `id`, zooming in to a readable scale if needed. */
  focusOn(id: string): boolean {
    const p = this.pos.get(id) || this.frameBoxes.get(id);
    if (!p) {
      return false;
    }
    const { W, H } = this.size();
    if (this.scale < 0.9) {
      this.scale = Math.min(1, Math.max(this.scale, (W - 40) / Math.max(p.w, 1)));
    }
    this.tx = W / 2 - (p.x + p.w / 2) * this.scale;
    this.ty = H / 2 - (p.y + p.h / 2) * this.scale;
    this.userMoved = true;
    this.applyTransform();
    this.paint();
    return true;
  }

  private size(): { W: number; H: number } {
    const r = this.canvas.getBoundingClientRect();
    return { W: r.width || 800, H: r.height || 400 };
  }

  /** A grip under a notebook output: drag to change its height. */
  private resizeHandle(): HTMLDivElement {
    const h = el('div', 'tapelab-resize');
    h.title = 'drag to resize';
    h.addEventListener('pointerdown', ev => {
      ev.preventDefault();
      ev.stopPropagation();
      const y0 = ev.clientY;
      const h0 = this.node.getBoundingClientRect().height;
      const move = (e: PointerEvent) => {
        this.node.style.height = `${Math.max(MIN_HEIGHT, Math.round(h0 + e.clientY - y0))}px`;
      };
      const up = () => {
        window.removeEventListener('pointermove', move);
        window.removeEventListener('pointerup', up);
      };
      window.addEventListener('pointermove', move);
      window.addEventListener('pointerup', up);
    });
    return h;
  }

  private updateInfo(): void {
    const m = this.store.meta;
    // a graph without a backward pass (FX, capture) counts ops, not "0 bwd"
    let t = m.backward || this.viewKind === 'tape' ? `${m.forward} fwd · ${m.backward} bwd` : `${m.forward} ops`;
    if (m.folded) {
      t += ` · ${m.steps} steps, ${m.folded} repeats folded`;
    }
    if (m.truncated) {
      t += ` · showing ${this.store.nodes.length} of ${m.total}`;
    }
    this.node.dataset.steps = String(m.steps || 0);
    this.node.dataset.folded = String(m.folded || 0);
    if (this.running) {
      t = (m.backward ? 'backward ▸ ' : 'recording ▸ ') + t;
    }
    this.info.textContent = t;
  }

  /** Draw units (only those inside the viewport, plus a margin), edges and group frames. */
  private paint(): void {
    const rect = this.canvas.getBoundingClientRect();
    const W = rect.width || 800;
    const H = rect.height || 400;
    const margin = 200;
    const lod = this.scale < LOD_SCALE;
    this.node.classList.toggle('tapelab-lod', lod);
    this.node.dataset.lod = String(lod);
    this.node.dataset.scale = this.scale.toFixed(4);
    this.bulkOn = this.vis.units.length > BULK_UNITS;
    this.bulk.style.display = this.bulkOn ? 'block' : 'none';
    this.node.dataset.renderer = this.bulkOn ? 'canvas' : 'svg';
    if (this.bulkOn) {
      this.unitLayer.textContent = '';
      this.edgeLayer.textContent = '';
      this.frameLayer.textContent = '';
      this.node.dataset.drawn = String(this.paintBulk(W, H));
      this.paintFrames();
      this.minimap.setView({ x: -this.tx / this.scale, y: -this.ty / this.scale, w: W / this.scale, h: H / this.scale });
      return;
    }
    const x0 = (-this.tx - margin) / this.scale;
    const y0 = (-this.ty - margin) / this.scale;
    const x1 = (W - this.tx + margin) / this.scale;
    const y1 = (H - this.ty + margin) / this.scale;
    const inView = (p: { x: number; y: number; w: number; h: number }) =>
      p.x + p.w >= x0 && p.x <= x1 && p.y + p.h >= y0 && p.y <= y1;
    this.unitLayer.textContent = '';
    this.edgeLayer.textContent = '';
    this.frameLayer.textContent = '';
    let drawn = 0;
    for (const u of this.vis.units) {
      const p = this.pos.get(u.id)!;
      if (!inView(p)) {
        continue;
      }
      drawn++;
      this.unitLayer.appendChild(this.unitEl(u, p));
    }
    this.vis.edges.forEach((e, i) => {
      const a = this.pos.get(e.source);
      const b = this.pos.get(e.target);
      if (!a || !b || (!inView(a) && !inView(b))) {
        return;
      }
      const spline = this.paths ? this.paths[i] : null;
      const sx = a.x + a.w / 2;
      const sy = a.y + a.h;
      const tx = b.x + b.w / 2;
      const ty = b.y;
      let d: string;
      if (spline) {
        d = spline; // Graphviz's route, around the boxes
      } else if (e.kind === 'grad' && b.y <= a.y) {
        // gradient flowing up the picture: from the top of the source to the bottom of the target
        d = `M${sx},${a.y} C${sx},${a.y - 30} ${tx},${b.y + b.h + 30} ${tx},${b.y + b.h}`;
      } else if (b.y <= a.y) {
        d = `M${a.x + a.w},${a.y + a.h / 2} C${a.x + a.w + 40},${a.y} ${b.x + b.w + 40},${b.y + b.h} ${b.x + b.w},${b.y + b.h / 2}`;
      } else {
        const my = (sy + ty) / 2;
        d = `M${sx},${sy} C${sx},${my} ${tx},${my} ${tx},${ty}`;
      }
      const path = svg('path', {
        d, class: 'tapelab-edge' + (e.kind === 'grad' ? ' tapelab-grad' : ''),
        'marker-end': `url(#${e.kind === 'grad' ? 'tapelab-arrow-grad' : 'tapelab-arrow'})`
      });
      if (e.count > 1) {
        path.setAttribute('stroke-width', String(Math.min(1.2 + Math.log2(e.count), 5)));
      }
      this.edgeLayer.appendChild(path);
    });
    this.paintFrames();
    this.node.dataset.drawn = String(drawn);
    this.minimap.setView({ x: -this.tx / this.scale, y: -this.ty / this.scale, w: W / this.scale, h: H / this.scale });
  }

  /** A dashed frame around every expanded group, with a label that collapses it again. */
  private paintFrames(): void {
    const boxes = new Map<string, { x0: number; y0: number; x1: number; y1: number }>();
    for (const [gid, f] of this.gvFrames ?? []) {
      boxes.set(gid, { x0: f.x, y0: f.y, x1: f.x + f.w, y1: f.y + f.h }); // Graphviz's clusters
    }
    for (const u of this.gvFrames ? [] : this.vis.units) {
      if (u.kind !== 'node' || !u.node || u.node.kind === 'backward') {
        continue;
      }
      const p = this.pos.get(u.id)!;
      let gid = u.node.group;
      while (gid) {
        const g = this.store.groups.get(gid);
        if (!g) {
          break;
        }
        const b = boxes.get(gid);
        if (b) {
          b.x0 = Math.min(b.x0, p.x); b.y0 = Math.min(b.y0, p.y);
          b.x1 = Math.max(b.x1, p.x + p.w); b.y1 = Math.max(b.y1, p.y + p.h);
        } else {
          boxes.set(gid, { x0: p.x, y0: p.y, x1: p.x + p.w, y1: p.y + p.h });
        }
        gid = g.parent;
      }
    }
    this.frameBoxes.clear();
    const lod = this.scale < LOD_SCALE;
    // labels sit above their frame at LABEL_PX on screen; an outer frame's label goes above
    // those of the frames nested in it (they would start at the same height)
    const px = LABEL_PX / this.scale;
    const band = px + 4 / this.scale;
    const below = new Map<string, number>();
    for (const gid of boxes.keys()) {
      let d = 0;
      let pid = this.store.groups.get(gid)?.parent ?? null;
      while (pid && boxes.has(pid)) {
        d++;
        below.set(pid, Math.max(below.get(pid) ?? 0, d));
        pid = this.store.groups.get(pid)?.parent ?? null;
      }
    }
    for (const [gid, b] of boxes) {
      const g = this.store.groups.get(gid)!;
      const depth = g.path.split('.').length;
      const pad = this.gvFrames ? 0 : 14 - Math.min(depth, 4) * 2;
      const frame = svg('g', { class: 'tapelab-frame' + (this.current === gid ? ' tapelab-current' : ''), 'data-group': gid });
      const fx = b.x0 - pad;
      const top = this.gvFrames ? 0 : 8;
      const fy = b.y0 - pad - top;
      const fw = b.x1 - b.x0 + 2 * pad;
      const fh = b.y1 - b.y0 + 2 * pad + top;
      this.frameBoxes.set(gid, { x: fx, y: fy, w: fw, h: fh });
      frame.appendChild(svg('rect', { x: fx, y: fy, width: fw, height: fh, rx: 6 }));
      const label = svg('text', { x: fx + 4, y: b.y0 - pad + 2, class: 'tapelab-glabel' });
      label.style.fontSize = `${px}px`;
      // Graphviz keeps a band for the label inside its cluster: the label sits there when it fits
      const inside = this.gvFrames && px <= 16 && !below.get(gid);
      label.setAttribute('y', String(inside ? fy + px + 1 : fy - 3 / this.scale - (below.get(gid) ?? 0) * band));
      const chars = Math.floor((fw * this.scale) / (0.6 * LABEL_PX));
      label.textContent = clip('▾ ' + (g.path || g.label), Math.max(lod ? 6 : 12, chars));
      label.addEventListener('click', ev => {
        ev.stopPropagation();
        this.store.setExpanded(gid, false);
      });
      frame.appendChild(label);
      this.frameLayer.appendChild(frame);
    }
  }

  private unitEl(u: Unit, p: { x: number; y: number; w: number; h: number }): SVGElement {
    const cls = ['tapelab-unit', 'tapelab-' + u.nodeKind];
    if (this.current === u.id) {
      cls.push('tapelab-current');
    }
    if (u.match) {
      cls.push('tapelab-match');
    }
    if (this.pinned === u.id) {
      cls.push('tapelab-pinned');
    }
    if (this.selected === u.id) {
      cls.push('tapelab-selected');
    }
    if (!this.seen.has(u.id)) {
      this.seen.add(u.id);
      if (this.running) {
        cls.push('tapelab-new');
      }
    }
    const g = svg('g', { class: cls.join(' '), transform: `translate(${p.x},${p.y})`, 'data-id': u.id, 'data-kind': u.nodeKind });
    if (u.node) {
      g.setAttribute('data-op', u.node.op); // also when the overview draws no text
    }
    if (u.kind === 'group') {
      g.setAttribute('data-label', u.label); // the whole name (the drawn one may be clipped)
      const tip = svg('title');
      tip.textContent = u.label;
      g.appendChild(tip);
    }
    g.appendChild(svg('rect', { class: 'tapelab-box', width: p.w, height: p.h, rx: u.kind === 'group' ? 8 : 5 }));
    const title = svg('text', { x: 8, y: 14 });
    const sub = svg('text', { x: 8, y: 27, class: 'tapelab-sub' });
    if (u.kind === 'group') {
      // a group's name is never smaller than LABEL_PX on screen
      const px = Math.max(11.5, LABEL_PX / this.scale);
      title.setAttribute('class', 'tapelab-glabel');
      title.style.fontSize = `${px}px`;
      title.setAttribute('y', String(Math.min(4 + px * 0.85, p.h - 16)));
      sub.setAttribute('y', String(p.h - 14));
      title.textContent = clip('▸ ' + u.label, Math.max(6, Math.floor((p.w - 12) / (0.6 * px)))) + (u.repeat > 1 ? ` ×${u.repeat}` : '');
      sub.textContent = `${u.forward} ops` + (u.backward ? ` · ${u.backward} bwd` : '') + (u.repeat > 1 ? ' (folded)' : '');
      if (u.backward) {
        // backward progress inside a collapsed group: gradient steps run over ops recorded
        const frac = Math.min(1, u.backward / Math.max(1, u.forward));
        g.appendChild(svg('rect', { class: 'tapelab-progress', x: 8, y: 41, width: (p.w - 16) * frac, height: 4, rx: 2 }));
      }
    } else {
      const n = u.node!;
      title.textContent = clip(n.kind === 'leaf' ? 'tensor' : n.op, 18);
      sub.textContent = clip(fmtShape(n.shape) + (n.kind === 'backward' && n.grad_ops ? ` · ${n.grad_ops} ops` : ''), 22);
    }
    if (this.scale < LOD_SCALE) {
      if (u.kind === 'group') {
        // overview: the group's name, at a readable size on screen, across (and beyond) its box
        const px = LABEL_PX / this.scale;
        title.setAttribute('class', 'tapelab-glabel');
        title.style.fontSize = `${px}px`;
        title.setAttribute('y', String(p.h / 2 + px * 0.35));
        title.setAttribute('x', '4');
        title.textContent = clip(u.label + (u.repeat > 1 ? ` ×${u.repeat}` : ''),
          Math.max(6, Math.floor(((p.w + 20) * this.scale) / (0.6 * LABEL_PX))));
        g.append(title);
      }
      // nodes: only the box (the card tells the rest); shape lines are hidden
    } else {
      g.append(title, sub);
    }
    g.addEventListener('mouseenter', ev => this.showCard(u, ev as MouseEvent, false));
    g.addEventListener('mouseleave', () => {
      if (!this.pinned) {
        this.card.style.display = 'none';
      }
    });
    g.addEventListener('click', ev => {
      ev.stopPropagation();
      this.activate(u, ev as MouseEvent);
    });
    if (this.decorate) {
      this.decorate(u, g);
    }
    return g;
  }

  /** A click on a unit: a group expands, a node's card is pinned and the node selected everywhere. */
  private activate(u: Unit, ev: MouseEvent): void {
    if (u.kind === 'group') {
      this.store.setExpanded(u.id, true);
      if (u.repeat > 1) {
        this.store.fold = false;
      }
      return;
    }
    this.pinned = this.pinned === u.id ? null : u.id;
    this.selected = null;
    this.node.dataset.pinned = this.pinned ?? '';
    // every other open view highlights the same op (and tells this card what it knows)
    publishSelection(this.pinned && u.node ? selectionKey(u.node, this.viewKind, this.viewId) : null, this.viewId);
    this.showCard(u, ev, this.pinned !== null);
    this.paint();
  }

  /** Many units: boxes and edges on the 2D canvas (frames and their labels stay in SVG). */
  private paintBulk(W: number, H: number): number {
    const ctx = this.bulk.getContext('2d');
    if (!ctx) {
      return 0;
    }
    const dpr = window.devicePixelRatio || 1;
    if (this.bulk.width !== Math.round(W * dpr) || this.bulk.height !== Math.round(H * dpr)) {
      this.bulk.width = Math.round(W * dpr);
      this.bulk.height = Math.round(H * dpr);
    }
    const marks = new Map<string, string>();
    for (const u of this.vis.units) {
      if (u.match) {
        marks.set(u.id, '#dc2626');
      }
    }
    for (const [id, c] of [[this.selected, '#0891b2'], [this.pinned, '#111827'], [this.current, '#dc2626']] as [string | null, string][]) {
      if (id) {
        marks.set(id, c);
      }
    }
    return drawBulk(ctx, { tx: this.tx, ty: this.ty, scale: this.scale, W, H }, dpr, this.vis.units, this.vis.edges, this.pos, marks, LABEL_PX);
  }

  /** The unit under a pointer event in bulk mode. */
  private unitAt(ev: MouseEvent): Unit | null {
    const r = this.canvas.getBoundingClientRect();
    return hitTest(this.vis.units, this.pos, (ev.clientX - r.left - this.tx) / this.scale, (ev.clientY - r.top - this.ty) / this.scale);
  }

  private showCard(u: Unit, ev: MouseEvent, pin: boolean): void {
    if (this.pinned && !pin && this.pinned !== u.id) {
      return;
    }
    const c = this.card;
    c.textContent = '';
    c.classList.toggle('tapelab-pinned-card', pin);
    const shown = new Set<string>(); // values already on the card: the other views' copies are left out
    const row = (k: string, v: string) => {
      if (!v) {
        return;
      }
      shown.add(v);
      const r = el('div', 'tapelab-row');
      r.dataset.key = k;
      r.title = `${k}: ${v}`;
      r.appendChild(el('span', 'tapelab-k', k));
      r.appendChild(document.createTextNode(v));
      c.appendChild(r);
    };
    if (u.kind === 'group') {
      c.appendChild(el('b', '', u.label));
      row('ops', `${u.forward} forward · ${u.backward} backward · ${u.count} nodes`);
      if (u.repeat > 1) {
        row('folded', `${u.repeat} identical blocks`);
      }
      row('', 'click to expand');
    } else {
      const n = u.node!;
      c.appendChild(el('b', '', `${n.op}  (${n.kind})`));
      row('module', n.module);
      row('source', n.source ?? '');
      row('param', n.param ?? '');
      row('params', this.paramNames(n));
      row('shape', fmtShape(n.shape));
      if (n.input_shapes.length) {
        row(n.kind === 'backward' ? 'grad in' : 'inputs', n.input_shapes.map(fmtShape).join(' '));
      }
      row('dtype', n.dtype);
      row('device', n.device);
      row('time', n.kind === 'leaf' ? '' : fmtTime(n.time_ns));
      row('value', fmtSummary(n.value));
      row('grad', fmtSummary(n.grad));
      if (n.grad_ops) {
        row('vjp ops', String(n.grad_ops));
      }
      for (const [k, v] of this.facts ? this.facts(n) : []) {
        row(k, v);
      }
      // what the other open views know of the same op (profile time and memory, capture buffer...)
      const facts = describeSelection(selectionKey(n, this.viewKind, this.viewId)).filter(([, v]) => !shown.has(v));
      if (facts.length) {
        c.appendChild(el('div', 'tapelab-card-sep', 'in the other views'));
        for (const [k, v] of facts) {
          row(k, v);
        }
      }
    }
    // keep the card inside the canvas: right of and below the pointer, else left or above it
    const r = this.canvas.getBoundingClientRect();
    c.style.display = 'block';
    c.style.left = '0px';
    c.style.top = '0px';
    const cw = c.offsetWidth;
    const ch = c.offsetHeight;
    const mx = ev.clientX - r.left;
    const my = ev.clientY - r.top;
    const left = mx + 12 + cw <= r.width ? mx + 12 : mx - 12 - cw;
    const top = my + 12 + ch <= r.height ? my + 12 : my - 12 - ch;
    c.style.left = `${Math.max(0, Math.min(left, r.width - cw))}px`;
    c.style.top = `${Math.max(0, Math.min(top, r.height - ch))}px`;
    c.dataset.id = u.id;
  }

  /** Names of the parameters an op reads (leaf inputs that carry a `param` name). */
  private paramNames(n: GNode): string {
    if (n.kind === 'leaf') {
      return '';
    }
    const names: string[] = [];
    for (const e of this.store.edges) {
      if (e.target === n.id && e.kind === 'data') {
        const p = this.store.node(e.source)?.param;
        if (p) {
          names.push(p);
        }
      }
    }
    return names.join(', ');
  }

  /** Another view selected an op: highlight the same one here, revealing it (null: cleared). */
  private selectFromBus(key: SelectionKey | null): void {
    const n = key ? matchNode(this.store.nodes, key, this.viewKind) : null;
    this.selected = n ? n.id : null;
    this.node.dataset.selected = this.selected ?? '';
    if (!n) {
      this.paint();
      return;
    }
    if (this.pos.has(n.id)) {
      this.reveal(n.id);
      this.paint();
    } else {
      this.pendingReveal = n.id; // inside a collapsed group: expand, then pan once drawn
      this.store.reveal(n.id);
    }
  }

  /** What this view knows of the op `key` names, for another view's card. */
  private describe(key: SelectionKey): Fact[] {
    const n = matchNode(this.store.nodes, key, this.viewKind);
    if (!n) {
      return [];
    }
    const v = this.viewKind;
    const out: Fact[] = [[`${v} node`, `${n.label} (${n.kind})`]];
    if (n.source) {
      out.push(['source', n.source]);
    }
    if (n.kind !== 'leaf' && n.time_ns) {
      out.push([`${v} time`, fmtTime(n.time_ns)]);
    }
    out.push([`${v} value`, fmtSummary(n.value)], [`${v} grad`, fmtSummary(n.grad)]);
    return out.concat(this.facts ? this.facts(n) : []);
  }

  /** Centre the view on layout point (x, y), keeping the zoom (the minimap's pan). */
  private centerOn(x: number, y: number): void {
    const { W, H } = this.size();
    this.tx = W / 2 - x * this.scale;
    this.ty = H / 2 - y * this.scale;
    this.userMoved = true;
    this.applyTransform();
    this.paint();
  }

  /** Pan (keeping the zoom) so that the unit `id` is in view, if it is drawn and not in view yet. */
  reveal(id: string): boolean {
    const p = this.pos.get(id);
    if (!p) {
      return false;
    }
    const r = this.canvas.getBoundingClientRect();
    const W = r.width || 800;
    const H = r.height || 400;
    const x = p.x * this.scale + this.tx;
    const y = p.y * this.scale + this.ty;
    if (x >= 0 && y >= 0 && x + p.w * this.scale <= W && y + p.h * this.scale <= H) {
      return true;
    }
    this.tx = W / 2 - (p.x + p.w / 2) * this.scale;
    this.ty = H / 2 - (p.y + p.h / 2) * this.scale;
    this.applyTransform();
    this.paint();
    return true;
  }

  /**
   * Fit the whole graph into view, at any zoom (no floor): below LOD_SCALE the picture becomes
   * an overview (boxes, group labels at LABEL_PX on screen). Labels drawn at screen size can
   * reach past the units, so the drawn picture is measured and fitted again.
   */
  fit(res?: LayoutResult): void {
    const { W, H } = this.size();
    const M = 12;
    let box = { x: 0, y: 0, w: res?.width ?? 0, h: res?.height ?? 0 };
    if (!res) {
      let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
      for (const p of this.pos.values()) {
        x0 = Math.min(x0, p.x); y0 = Math.min(y0, p.y);
        x1 = Math.max(x1, p.x + p.w); y1 = Math.max(y1, p.y + p.h);
      }
      box = x0 <= x1 ? { x: x0, y: y0, w: x1 - x0, h: y1 - y0 } : { x: 0, y: 0, w: 1, h: 1 };
    }
    const place = (b: { x: number; y: number; w: number; h: number }, s: number) => {
      this.scale = s;
      this.tx = Math.max(M, (W - b.w * s) / 2) - b.x * s;
      this.ty = M - b.y * s;
      this.applyTransform();
      this.paint();
    };
    let s = Math.min(1.1, (W - 2 * M) / Math.max(box.w, 1), (H - 2 * M) / Math.max(box.h, 1));
    place(box, s);
    for (let k = 0; k < 4 && typeof (this.viewport as any).getBBox === 'function'; k++) {
      let bb: { x: number; y: number; width: number; height: number };
      try {
        bb = this.viewport.getBBox();
      } catch {
        break;
      }
      if (!bb.width || !bb.height) {
        break;
      }
      const b = { x: bb.x, y: bb.y, w: bb.width, h: bb.height };
      const s2 = Math.min(1.1, (W - 2 * M) / b.w, (H - 2 * M) / b.h);
      const fits = s2 >= s * 0.999;
      s = Math.min(s, s2);
      place(b, fits ? s : s * 0.97);
      if (fits) {
        break;
      }
      s *= 0.97;
    }
    this.userMoved = false;
    this.node.dataset.fitScale = this.scale.toFixed(4);
  }

  private applyTransform(): void {
    this.viewport.setAttribute('transform', `translate(${this.tx},${this.ty}) scale(${this.scale})`);
    if (this.bulkOn && !this.bulkFrame) {
      // the canvas does not follow the SVG transform: redraw it once per animation frame
      this.bulkFrame = requestAnimationFrame(() => {
        this.bulkFrame = 0;
        const { W, H } = this.size();
        this.paintBulk(W, H);
        this.minimap.setView({ x: -this.tx / this.scale, y: -this.ty / this.scale, w: W / this.scale, h: H / this.scale });
      });
    }
  }

  private bindPanZoom(): void {
    let drag: { x: number; y: number; tx: number; ty: number } | null = null;
    let repaint = false;
    const later = () => {
      if (repaint) {
        return;
      }
      repaint = true;
      setTimeout(() => {
        repaint = false;
        this.paint();
      }, 60);
    };
    this.canvas.addEventListener('wheel', ev => {
      // the wheel scrolls the notebook, unless Ctrl/⌘ is held or the graph was clicked (focused)
      if (!(ev.ctrlKey || ev.metaKey) && document.activeElement !== this.canvas) {
        return;
      }
      ev.preventDefault();
      this.userMoved = true;
      const r = this.canvas.getBoundingClientRect();
      const mx = ev.clientX - r.left;
      const my = ev.clientY - r.top;
      const k = Math.exp(-ev.deltaY * 0.0015);
      const s = Math.max(0.005, Math.min(4, this.scale * k));
      this.tx = mx - ((mx - this.tx) * s) / this.scale;
      this.ty = my - ((my - this.ty) * s) / this.scale;
      this.scale = s;
      this.applyTransform();
      later();
    }, { passive: false });
    this.canvas.addEventListener('pointerdown', ev => {
      this.canvas.focus({ preventScroll: true });
      if ((ev.target as Element).closest('.tapelab-unit, .tapelab-frame text')) {
        return;
      }
      drag = { x: ev.clientX, y: ev.clientY, tx: this.tx, ty: this.ty };
      this.canvas.style.cursor = 'grabbing';
    });
    window.addEventListener('pointermove', ev => {
      if (!drag) {
        return;
      }
      this.userMoved = true;
      this.tx = drag.tx + ev.clientX - drag.x;
      this.ty = drag.ty + ev.clientY - drag.y;
      this.applyTransform();
    });
    window.addEventListener('pointerup', () => {
      if (drag) {
        drag = null;
        this.canvas.style.cursor = '';
        this.paint();
      }
    });
    let down: { x: number; y: number } | null = null;
    this.canvas.addEventListener('pointerdown', ev => {
      down = { x: ev.clientX, y: ev.clientY };
    });
    this.canvas.addEventListener('pointermove', ev => {
      if (!this.bulkOn || drag) {
        return;
      }
      const u = this.unitAt(ev);
      this.canvas.style.cursor = u ? 'pointer' : '';
      if (u) {
        this.showCard(u, ev, false);
      } else if (!this.pinned) {
        this.card.style.display = 'none';
      }
    });
    this.canvas.addEventListener('click', ev => {
      const still = down && Math.abs(ev.clientX - down.x) + Math.abs(ev.clientY - down.y) < 4;
      const u = this.bulkOn && still ? this.unitAt(ev) : null;
      if (u) {
        this.activate(u, ev);
        return;
      }
      if (this.pinned) {
        this.pinned = null;
        this.card.style.display = 'none';
        this.paint();
      }
    });
  }

  get drawn(): number {
    return this.drawnVersion;
  }

  /**
   * The visible graph laid out both ways, measured: edge crossings and overlapping boxes of the
   * hand layout and of Graphviz's (null when Graphviz is not available), and dot's time.
   */
  async layoutStats(): Promise<{ units: number; edges: number; hand: LayoutMeasure; dot: LayoutMeasure | null; dotMs: number }> {
    const vis = this.store.visible();
    const input = this.layoutInput(vis);
    const measure = (r: LayoutResult): LayoutMeasure => {
      const b = { x: r.x, y: r.y, widths: input.widths, heights: input.heights };
      return { crossings: countCrossings(b, input.edges), overlaps: countOverlaps(b), width: r.width, height: r.height };
    };
    const hand = measure(computeLayout(input));
    const gv = await graphvizLayout(this.gvInput(vis, input));
    return { units: vis.units.length, edges: vis.edges.length, hand, dot: gv ? measure(gv) : null, dotMs: gv ? gv.ms : 0 };
  }
}

function clip(s: string, n: number): string {
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}
