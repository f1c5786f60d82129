/**
 * The minimap: every unit as a dot-sized box on a small 2D canvas in the corner of a graph,
 * with the part in view outlined; click or drag on it to pan there. Shown only when the picture
 * does not fit the canvas at the current zoom. A canvas (not SVG) so 100,000 boxes cost one
 * draw.
 */
import { el } from './format';

export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

/** Scale and offset that fit `bounds` into a w x h map, centred: map = (p - bounds.xy) * s + off. */
export function mapTransform(bounds: Rect, w: number, h: number): { s: number; ox: number; oy: number } {
  const s = Math.min(w / Math.max(bounds.w, 1), h / Math.max(bounds.h, 1));
  return { s, ox: (w - bounds.w * s) / 2 - bounds.x * s, oy: (h - bounds.h * s) / 2 - bounds.y * s };
}

/** Whether the view (layout coordinates) shows all of `bounds`: then no minimap is needed. */
export function fitsInView(bounds: Rect, view: Rect): boolean {
  return bounds.x >= view.x - 1 && bounds.y >= view.y - 1 &&
    bounds.x + bounds.w <= view.x + view.w + 1 && bounds.y + bounds.h <= view.y + view.h + 1;
}

export class Minimap {
  readonly node: HTMLCanvasElement;
  private boxes: { r: Rect; cls: string }[] = [];
  private picture: HTMLCanvasElement | null = null; // the boxes, drawn once per layout
  private bounds: Rect = { x: 0, y: 0, w: 1, h: 1 };
  private view: Rect = { x: 0, y: 0, w: 1, h: 1 };
  private readonly W = 168;
  private readonly H = 112;

  /** `pan(x, y)` centres the view on layout point (x, y). */
  constructor(private pan: (x: number, y: number) => void) {
    this.node = el('canvas', 'tapelab-minimap');
    this.node.width = this.W;
    this.node.height = this.H;
    this.node.title = 'minimap: click or drag to pan';
    let down = false;
    const go = (ev: PointerEvent) => {
      const r = this.node.getBoundingClientRect();
      const t = mapTransform(this.bounds, this.W, this.H);
      const mx = ((ev.clientX - r.left) * this.W) / Math.max(r.width, 1);
      const my = ((ev.clientY - r.top) * this.H) / Math.max(r.height, 1);
      this.pan((mx - t.ox) / t.s, (my - t.oy) / t.s);
    };
    this.node.addEventListener('pointerdown', ev => {
      ev.stopPropagation();
      ev.preventDefault();
      down = true;
      this.node.setPointerCapture?.(ev.pointerId);
      go(ev);
    });
    this.node.addEventListener('pointermove', ev => {
      if (down) {
        go(ev);
      }
    });
    this.node.addEventListener('pointerup', () => {
      down = false;
    });
    this.node.addEventListener('click', ev => ev.stopPropagation());
    this.node.addEventListener('wheel', ev => ev.stopPropagation());
  }

  /** New picture: the boxes (layout coordinates) and their CSS-ish kind for colour. */
  setBoxes(boxes: { r: Rect; cls: string }[]): void {
    this.boxes = boxes;
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const { r } of boxes) {
      x0 = Math.min(x0, r.x); y0 = Math.min(y0, r.y);
      x1 = Math.max(x1, r.x + r.w); y1 = Math.max(y1, r.y + r.h);
    }
    this.bounds = x0 <= x1 ? { x: x0, y: y0, w: x1 - x0, h: y1 - y0 } : { x: 0, y: 0, w: 1, h: 1 };
    this.picture = null;
  }

  /** The part of the picture in view (layout coordinates); hides the map when all of it is. */
  setView(view: Rect): void {
    this.view = view;
    const show = this.boxes.length > 0 && !fitsInView(this.bounds, view);
    this.node.style.display = show ? 'block' : 'none';
    this.node.dataset.shown = String(show);
    if (show) {
      this.draw();
    }
  }

  private draw(): void {
    const ctx = this.node.getContext('2d');
    if (!ctx) {
      return;
    }
    const t = mapTransform(this.bounds, this.W, this.H);
    if (!this.picture) {
      // the boxes change only with the layout: draw them once, then each pan costs one copy
      this.picture = document.createElement('canvas');
      this.picture.width = this.W;
      this.picture.height = this.H;
      const pc = this.picture.getContext('2d');
      const colors: Record<string, string> = { group: '#a78bfa', backward: '#fb923c', leaf: '#9ca3af', forward: '#60a5fa' };
      for (const { r, cls } of pc ? this.boxes : []) {
        pc!.fillStyle = colors[cls] || '#60a5fa';
        pc!.fillRect(r.x * t.s + t.ox, r.y * t.s + t.oy, Math.max(1, r.w * t.s), Math.max(1, r.h * t.s));
      }
    }
    ctx.clearRect(0, 0, this.W, this.H);
    ctx.drawImage(this.picture, 0, 0);
    ctx.strokeStyle = '#dc2626';
    ctx.lineWidth = 1.5;
    ctx.strokeRect(this.view.x * t.s + t.ox, this.view.y * t.s + t.oy, this.view.w * t.s, this.view.h * t.s);
  }
}
