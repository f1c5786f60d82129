import { Summary } from './types';

export function fmtShape(s: number[] | null | undefined): string {
  return s === null || s === undefined ? '' : '(' + s.join(', ') + ')';
}

export function fmtNum(v: number | null | undefined): string {
  if (v === null || v === undefined) {
    return '–';
  }
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(3) : v.toPrecision(4);
}

export function fmtTime(ns: number): string {
  if (!ns) {
    return '–';
  }
  return ns < 1e3 ? `${ns} ns` : ns < 1e6 ? `${(ns / 1e3).toFixed(1)} µs` : `${(ns / 1e6).toFixed(2)} ms`;
}

export function fmtSummary(s: Summary | null | undefined): string {
  if (!s) {
    return '';
  }
  let t = `min ${fmtNum(s.min)} · max ${fmtNum(s.max)} · mean ${fmtNum(s.mean)} · std ${fmtNum(s.std)} · ‖·‖ ${fmtNum(s.norm)}`;
  if (s.nan || s.inf) {
    t += ` · nan ${s.nan} · inf ${s.inf}`;
  }
  return t;
}

/** Create an element with text set through textContent: user strings are never parsed as HTML. */
export function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls = '', text = ''): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) {
    e.className = cls;
  }
  if (text) {
    e.textContent = text;
  }
  return e;
}

export const SVG_NS = 'http://www.w3.org/2000/svg';

export function svg(tag: string, attrs: Record<string, string | number> = {}): SVGElement {
  const e = document.createElementNS(SVG_NS, tag);
  for (const k of Object.keys(attrs)) {
    e.setAttribute(k, String(attrs[k]));
  }
  return e;
}
