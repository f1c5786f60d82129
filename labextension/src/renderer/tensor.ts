import { el, fmtNum, fmtShape, fmtSummary, svg } from './format';
import { injectStyle } from './style';
import { Summary } from './types';

/** What tapelab.widgets.TensorView sends: a summary, never the whole tensor. */
export interface TensorData {
  name: string;
  shape: number[];
  dtype: string;
  device: string;
  requires_grad: boolean;
  stats: Summary | null;
  grad: Summary | null;
  hist: { edges: number[]; counts: number[] } | null;
  heatmap: { rows: number; cols: number; values: number[]; min: number; max: number } | null;
  /** A batch of images (N, 1 or 3, H, W) tiled into one RGB picture (rows * cols triples, 0..255). */
  images?: { rows: number; cols: number; count: number; pixels: number[] } | null;
}

export function renderTensor(t: TensorData): HTMLDivElement {
  injectStyle();
  const root = el('div', 'tapelab-tensor');
  const table = el('table');
  const row = (k: string, v: string) => {
    const tr = el('tr');
    tr.appendChild(el('td', 'tapelab-k', k));
    tr.appendChild(el('td', '', v));
    table.appendChild(tr);
  };
  if (t.name) {
    row('name', t.name);
  }
  row('shape', fmtShape(t.shape));
  row('dtype', t.dtype);
  row('device', t.device);
  row('requires_grad', String(t.requires_grad));
  row('value', fmtSummary(t.stats));
  if (t.grad) {
    row('grad', fmtSummary(t.grad));
  }
  root.appendChild(table);
  if (t.hist && t.hist.counts.length) {
    const W = 220;
    const H = 80;
    const s = svg('svg', { width: W, height: H + 14, class: 'tapelab-hist' });
    const max = Math.max(...t.hist.counts, 1);
    const bw = W / t.hist.counts.length;
    t.hist.counts.forEach((c, i) => {
      const h = (c / max) * H;
      s.appendChild(svg('rect', { x: i * bw, y: H - h, width: Math.max(bw - 1, 1), height: h, fill: '#60a5fa' }));
    });
    const lo = svg('text', { x: 0, y: H + 12, 'font-size': 10 });
    lo.textContent = fmtNum(t.hist.edges[0]);
    const hi = svg('text', { x: W, y: H + 12, 'font-size': 10, 'text-anchor': 'end' });
    hi.textContent = fmtNum(t.hist.edges[t.hist.edges.length - 1]);
    s.append(lo, hi);
    root.appendChild(s);
  }
  if (t.heatmap) {
    const { rows, cols, values, min, max } = t.heatmap;
    const span = max - min || 1;
    root.appendChild(
      pixelCanvas('tapelab-heatmap', rows, cols, i => {
        const v = values[i];
        const f = Number.isFinite(v) ? (v - min) / span : NaN;
        // diverging blue-white-red; NaN/Inf in green
        return Number.isNaN(f) ? [34, 197, 94] : f < 0.5 ? [255 * f * 2, 255 * f * 2, 255] : [255, 255 * (1 - f) * 2, 255 * (1 - f) * 2];
      })
    );
  }
  if (t.images) {
    const { rows, cols, pixels } = t.images;
    root.appendChild(pixelCanvas('tapelab-images', rows, cols, i => [pixels[3 * i], pixels[3 * i + 1], pixels[3 * i + 2]]));
  }
  return root;
}

/** A rows x cols picture, one canvas pixel per value, scaled up to about 160 px with crisp pixels. */
function pixelCanvas(className: string, rows: number, cols: number, rgbAt: (i: number) => number[]): HTMLCanvasElement {
  const c = document.createElement('canvas');
  c.className = className;
  c.width = cols;
  c.height = rows;
  const scale = Math.max(1, Math.floor(160 / Math.max(rows, cols)));
  c.style.width = `${cols * scale}px`;
  c.style.height = `${rows * scale}px`;
  c.style.imageRendering = 'pixelated';
  const ctx = c.getContext('2d');
  if (ctx) {
    const img = ctx.createImageData(cols, rows);
    for (let i = 0; i < rows * cols; i++) {
      const [r, g, b] = rgbAt(i);
      img.data.set([r, g, b, 255], i * 4);
    }
    ctx.putImageData(img, 0, 0);
  }
  return c;
}
