/**
 * Measures of a laid-out picture, for tests and the status line: how many edges cross and how
 * many boxes overlap. Edges are taken as straight segments between box centres, so two layouts
 * of the same graph are compared on equal terms.
 */
export interface Boxes {
  x: number[];
  y: number[];
  widths: number[];
  heights: number[];
}

/** Pairs of edges (flat [s, t, s, t, ...] unit indices) whose segments cross, sharing no end. */
export function countCrossings(b: Boxes, edges: number[]): number {
  const seg: [number, number, number, number, number, number][] = [];
  for (let k = 0; k < edges.length; k += 2) {
    const s = edges[k];
    const t = edges[k + 1];
    if (s !== t) {
      seg.push([b.x[s] + b.widths[s] / 2, b.y[s] + b.heights[s] / 2, b.x[t] + b.widths[t] / 2, b.y[t] + b.heights[t] / 2, s, t]);
    }
  }
  const side = (ax: number, ay: number, bx: number, by: number, cx: number, cy: number) =>
    Math.sign((bx - ax) * (cy - ay) - (by - ay) * (cx - ax));
  let n = 0;
  for (let i = 0; i < seg.length; i++) {
    const [a0, a1, a2, a3, as, at] = seg[i];
    for (let j = i + 1; j < seg.length; j++) {
      const [b0, b1, b2, b3, bs, bt] = seg[j];
      if (as === bs || as === bt || at === bs || at === bt) {
        continue;
      }
      if (Math.max(a0, a2) < Math.min(b0, b2) || Math.max(b0, b2) < Math.min(a0, a2) ||
          Math.max(a1, a3) < Math.min(b1, b3) || Math.max(b1, b3) < Math.min(a1, a3)) {
        continue;
      }
      const d1 = side(a0, a1, a2, a3, b0, b1);
      const d2 = side(a0, a1, a2, a3, b2, b3);
      const d3 = side(b0, b1, b2, b3, a0, a1);
      const d4 = side(b0, b1, b2, b3, a2, a3);
      if (d1 * d2 < 0 && d3 * d4 < 0) {
        n++;
      }
    }
  }
  return n;
}

/** Pairs of boxes whose interiors intersect (a sweep over x). */
export function countOverlaps(b: Boxes): number {
  const order = b.x.map((_, i) => i).sort((i, j) => b.x[i] - b.x[j]);
  let n = 0;
  for (let a = 0; a < order.length; a++) {
    const i = order[a];
    const right = b.x[i] + b.widths[i];
    for (let c = a + 1; c < order.length && b.x[order[c]] < right - 0.5; c++) {
      const j = order[c];
      if (b.y[j] < b.y[i] + b.heights[i] - 0.5 && b.y[i] < b.y[j] + b.heights[j] - 0.5) {
        n++;
      }
    }
  }
  return n;
}
