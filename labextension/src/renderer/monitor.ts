/**
 * tapelab.widgets.Monitor: live curves of the logged metrics and of the time per step.
 * The kernel sends a full history (`data`) now and then and small `points` deltas between.
 */
import { el, fmtNum, svg } from './format';
import { injectProfileStyle } from './profile';

export interface MonitorData { steps: number[]; step_ms: (number | null)[]; series: Record<string, (number | null)[]> }
export interface MonitorPoint { step: number; step_ms: number | null; values: Record<string, number | null> }

export class MonitorStore {
  data: MonitorData = { steps: [], step_ms: [], series: {} };
  version = 0;
  private listeners: (() => void)[] = [];

  onChange(fn: () => void): () => void {
    this.listeners.push(fn);
    return () => {
      this.listeners = this.listeners.filter(f => f !== fn);
    };
  }

  set(d: MonitorData | null | undefined): void {
    if (!d || !d.steps) {
      return;
    }
    this.data = { steps: [...d.steps], step_ms: [...d.step_ms], series: Object.fromEntries(Object.entries(d.series || {}).map(([k, v]) => [k, [...v]])) };
    this.changed();
  }

  append(points: MonitorPoint[]): void {
    const d = this.data;
    for (const p of points) {
      const n = d.steps.length;
      d.steps.push(p.step);
      d.step_ms.push(p.step_ms);
      for (const [k, v] of Object.entries(p.values)) {
        if (!d.series[k]) {
          d.series[k] = new Array(n).fill(null);
        }
        d.series[k].push(v);
      }
      for (const s of Object.values(d.series)) {
        if (s.length < n + 1) {
          s.push(null);
        }
      }
    }
    this.changed();
  }

  private changed(): void {
    this.version++;
    this.listeners.forEach(f => f());
  }
}

const W = 260;
const H = 120;

function chart(name: string, xs: number[], ys: (number | null)[], cls: string): SVGElement {
  const s = svg('svg', { width: W, height: H, class: 'tapelab-monitor-chart ' + cls, 'data-name': name });
  const pts: [number, number][] = [];
  xs.forEach((x, i) => {
    const y = ys[i];
    if (y !== null && y !== undefined && Number.isFinite(y)) {
      pts.push([x, y]);
    }
  });
  const title = svg('text', { x: 4, y: 11 });
  title.textContent = name;
  s.appendChild(title);
  s.appendChild(svg('rect', { x: 40, y: 16, width: W - 44, height: H - 34, fill: 'none', stroke: '#e5e7eb' }));
  if (!pts.length) {
    return s;
  }
  let x0 = Math.min(...pts.map(p => p[0]));
  let x1 = Math.max(...pts.map(p => p[0]));
  let y0 = Math.min(...pts.map(p => p[1]));
  let y1 = Math.max(...pts.map(p => p[1]));
  if (x1 === x0) {
    x1 = x0 + 1;
  }
  if (y1 === y0) {
    y1 = y0 + Math.abs(y0 || 1) * 0.1;
    y0 -= Math.abs(y0 || 1) * 0.1;
  }
  const X = (x: number) => 40 + ((x - x0) / (x1 - x0)) * (W - 44);
  const Y = (y: number) => 16 + (1 - (y - y0) / (y1 - y0)) * (H - 34);
  s.appendChild(svg('polyline', { class: 'tapelab-curve', points: pts.map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(' ') }));
  for (const [v, y] of [[y1, 20], [y0, H - 18]] as [number, number][]) {
    const t = svg('text', { x: 2, y });
    t.textContent = fmtNum(v);
    s.appendChild(t);
  }
  const xl = svg('text', { x: 40, y: H - 4 });
  xl.textContent = `step ${x0}`;
  const xr = svg('text', { x: W - 4, y: H - 4, 'text-anchor': 'end' });
  xr.textContent = `${x1}`;
  s.append(xl, xr);
  return s;
}

export class MonitorView {
  readonly node: HTMLDivElement;
  private head: HTMLDivElement;
  private charts: HTMLDivElement;
  private frame = 0;
  private unsubscribe: () => void;

  constructor(private store: MonitorStore, private title = '') {
    injectProfileStyle();
    this.node = el('div', 'tapelab-monitor');
    this.head = el('div', 'tapelab-monitor-head');
    this.charts = el('div', 'tapelab-monitor-charts');
    this.node.append(this.head, this.charts);
    this.unsubscribe = store.onChange(() => this.schedule());
    this.draw();
  }

  setTitle(t: string): void {
    this.title = t;
    this.schedule();
  }

  private schedule(): void {
    if (!this.frame) {
      this.frame = requestAnimationFrame(() => {
        this.frame = 0;
        this.draw();
      });
    }
  }

  draw(): void {
    const d = this.store.data;
    const n = d.steps.length;
    this.head.textContent = '';
    if (this.title) {
      this.head.appendChild(el('b', '', this.title));
    }
    this.head.appendChild(el('span', 'tapelab-monitor-step', n ? `step ${d.steps[n - 1]}` : 'waiting for mon.log(...)'));
    for (const [k, v] of Object.entries(d.series)) {
      const last = [...v].reverse().find(x => x !== null && x !== undefined);
      this.head.appendChild(el('span', '', `${k} ${fmtNum(last ?? null)}`));
    }
    const times = d.step_ms.filter((x): x is number => x !== null && x !== undefined);
    if (times.length) {
      const recent = times.slice(-20);
      const avg = recent.reduce((a, b) => a + b, 0) / recent.length;
      this.head.appendChild(el('span', 'tapelab-monitor-rate', `${avg.toFixed(1)} ms/step · ${(1000 / avg).toFixed(1)} steps/s`));
    }
    this.charts.textContent = '';
    for (const [k, v] of Object.entries(d.series)) {
      this.charts.appendChild(chart(k, d.steps, v, ''));
    }
    this.charts.appendChild(chart('step time (ms)', d.steps, d.step_ms, 'tapelab-steptime'));
    this.node.dataset.points = String(n);
    this.node.dataset.series = String(Object.keys(d.series).length);
  }

  dispose(): void {
    this.unsubscribe();
    cancelAnimationFrame(this.frame);
  }
}
