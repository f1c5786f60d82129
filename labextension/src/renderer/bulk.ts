/**
 * Drawing many units on a 2D canvas instead of SVG: above BULK_UNITS visible units one SVG
 * element per box costs too much to build and to re-raster on every pan frame, while a canvas
 * redraws only what is in view in a few milliseconds. Frames and group labels stay in SVG (they
 * are few). Pure functions of the picture, so node's tests run them on a recording context.
 */
import type { Unit, UnitEdge } from './store';

/** Above this many visible units the graph is drawn on a canvas (measured: tests/e2e/test_views_layout.py). */
export const BULK_UNITS = 1500;

export interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface BulkView {
  tx: number;
  ty: number;
  scale: number;
  W: number; // canvas size in CSS px
  H: number;
}

/** The subset of CanvasRenderingContext2D used here. */
export interface Ctx2D {
  setTransform(a: number, b: number, c: number, d: number, e: number, f: number): void;
  clearRect(x: number, y: number, w: number, h: number): void;
  fillRect(x: number, y: number, w: number, h: number): void;
  strokeRect(x: number, y: number, w: number, h: number): void;
  beginPath(): void;
  moveTo(x: number, y: number): void;
  lineTo(x: number, y: number): void;
  stroke(): void;
  fillText(text: string, x: number, y: number): void;
  fillStyle: string | CanvasGradient | CanvasPattern;
  strokeStyle: string | CanvasGradient | CanvasPattern;
  lineWidth: number;
  font: string;
}

const FILL: Record<string, string> = { forward: '#dbeafe', backward: '#ffedd5', leaf: '#f3f4f6', group: '#ede9fe' };
const STROKE: Record<string, string> = { forward: '#2563eb', backward: '#ea580c', leaf: '#9ca3af', group: '#7c3aed' };

/** The part of the layout in view (plus a margin), in layout coordinates. */
export function viewRect(v: BulkView, margin = 50): Box {
  return { x: (-v.tx - margin) / v.scale, y: (-v.ty - margin) / v.scale, w: (v.W + 2 * margin) / v.scale, h: (v.H + 2 * margin) / v.scale };
}

function meets(p: Box, r: Box): boolean {
  return p.x + p.w >= r.x && p.x <= r.x + r.w && p.y + p.h >= r.y && p.y <= r.y + r.h;
}

/**
 * Draw the units and edges in view; `marks` maps unit ids to an outline colour (search match,
 * current, selected, pinned). Returns how many units were drawn.
 */
export function drawBulk(ctx: Ctx2D, v: BulkView, dpr: number, units: Unit[], edges: UnitEdge[],
  pos: Map<string, Box>, marks: Map<string, string>, labelPx: number): number {
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, v.W, v.H);
  ctx.setTransform(dpr * v.scale, 0, 0, dpr * v.scale, dpr * v.tx, dpr * v.ty);
  const r = viewRect(v);
  const px = 1 / v.scale; // one screen pixel in layout units
  ctx.lineWidth = px;
  ctx.strokeStyle = '#94a3b8';
  ctx.beginPath();
  for (const e of edges) {
    const a = pos.get(e.source);
    const b = pos.get(e.target);
    if (!a || !b || (!meets(a, r) && !meets(b, r))) {
      continue;
    }
    ctx.moveTo(a.x + a.w / 2, a.y + a.h);
    ctx.lineTo(b.x + b.w / 2, b.y);
  }
  ctx.stroke();
  const text = v.scale >= 0.6;
  let drawn = 0;
  for (const u of units) {
    const p = pos.get(u.id);
    if (!p || !meets(p, r)) {
      continue;
    }
    drawn++;
    ctx.fillStyle = FILL[u.nodeKind] || FILL.forward;
    ctx.fillRect(p.x, p.y, p.w, p.h);
    const mark = marks.get(u.id);
    ctx.strokeStyle = mark || STROKE[u.nodeKind] || STROKE.forward;
    ctx.lineWidth = mark ? 3 * px : px;
    ctx.strokeRect(p.x, p.y, p.w, p.h);
    if (text || u.kind === 'group') {
      // a group's name at a readable size on screen, a node's op only when zoomed in
      const size = u.kind === 'group' ? Math.max(11.5, labelPx / v.scale) : 11;
      ctx.font = `${u.kind === 'group' ? '600 ' : ''}${size}px system-ui, sans-serif`;
      ctx.fillStyle = u.kind === 'group' ? '#4c1d95' : '#111827';
      ctx.fillText(u.kind === 'group' ? u.label : u.node?.op ?? u.label, p.x + 6, p.y + Math.min(p.h - 4, size + 2));
    }
  }
  return drawn;
}

/** The unit under layout point (x, y), the last drawn (topmost) first; null if none. */
export function hitTest(units: Unit[], pos: Map<string, Box>, x: number, y: number): Unit | null {
  for (let i = units.length - 1; i >= 0; i--) {
    const p = pos.get(units[i].id);
    if (p && x >= p.x && x <= p.x + p.w && y >= p.y && y <= p.y + p.h) {
      return units[i];
    }
  }
  return null;
}
