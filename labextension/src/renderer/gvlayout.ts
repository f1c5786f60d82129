/**
 * Graphviz's `dot` layout of the visible units: expanded module groups become clusters,
 * one parameter sits on the row of the op that uses it (a weight, its bias above) and a backward unit on the row of its
 * forward unit (`rank=same`), gradient edges do not rank. Pure functions over a loaded
 * Graphviz instance, so the web worker (worker/gvworker.ts) and node's unit tests share them.
 *
 * Units are named n<index> in the DOT text: no user string reaches DOT but cluster labels,
 * which are escaped.
 */
import { LayoutInput, LayoutResult } from './layout';

export interface GvCluster {
  id: string;
  label: string;
  parent: number; // index into clusters, or -1
}

export interface GvInput extends LayoutInput {
  cluster: number[]; // per unit: the innermost cluster holding it, or -1
  clusters: GvCluster[];
  grad: boolean[]; // per edge (edges.length / 2 entries)
}

export interface GvFrame {
  id: string;
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface GvResult extends LayoutResult {
  engine: 'dot';
  paths: (string | null)[]; // per edge: an SVG path in layout coordinates
  frames: GvFrame[]; // per cluster that holds units
}

/** The least a loaded @hpcc-js/wasm-graphviz instance must offer. */
export interface GvEngine {
  layout(dot: string, format: string, engine: string): string;
}

const PT = 72; // Graphviz works in points and inches; one layout px is one point

function q(s: string): string {
  return '"' + s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, ' ') + '"';
}

/** The DOT text of a layout input; `sameRank` adds the rows of parameters and backward units. */
export function toDot(inp: GvInput, sameRank = true): string {
  const n = inp.ids.length;
  const members: number[][] = inp.clusters.map(() => []);
  const loose: number[] = [];
  for (let i = 0; i < n; i++) {
    (inp.cluster[i] >= 0 ? members[inp.cluster[i]] : loose).push(i);
  }
  const children: number[][] = inp.clusters.map(() => []);
  const roots: number[] = [];
  inp.clusters.forEach((c, k) => (c.parent >= 0 ? children[c.parent] : roots).push(k));
  // rows: a backward unit beside its forward unit, a parameter beside its only consumer, when
  // both are in the same cluster (dot refuses rank=same across clusters)
  const rows = new Map<number, number[]>(); // head unit -> units on its row
  if (sameRank) {
    const outs = new Array<number>(n).fill(0);
    const ins = new Array<number>(n).fill(0);
    const firstOut = new Array<number>(n).fill(-1);
    for (let k = 0; k < inp.edges.length; k += 2) {
      if (inp.grad[k / 2]) {
        continue;
      }
      const s = inp.edges[k];
      outs[s]++;
      ins[inp.edges[k + 1]]++;
      firstOut[s] = inp.edges[k + 1];
    }
    const pair = (head: number, other: number) => {
      if (head === other || inp.cluster[head] !== inp.cluster[other]) {
        return;
      }
      const row = rows.get(head);
      if (row) {
        row.push(other);
      } else {
        rows.set(head, [other]);
      }
    };
    // one parameter per op on its row (a weight, not also its bias): a wider row is crossed by
    // the edges that pass it (residual connections)
    const withParam = new Set<number>();
    for (let i = 0; i < n; i++) {
      if (inp.backward[i] && inp.anchors[i] >= 0 && !inp.backward[inp.anchors[i]]) {
        pair(inp.anchors[i], i);
      } else if (!inp.backward[i] && ins[i] === 0 && outs[i] === 1 && !inp.backward[firstOut[i]] &&
                 !withParam.has(firstOut[i])) {
        withParam.add(firstOut[i]);
        pair(firstOut[i], i);
      }
    }
  }
  const out: string[] = [
    'digraph G {',
    'graph [rankdir=TB, nodesep=0.25, ranksep=0.5, fontsize=12, fontname="Helvetica", newrank=true, remincross=true];',
    'node [shape=box, fixedsize=true, label=""];',
    'edge [arrowsize=0.6];'
  ];
  const nodeLine = (i: number) => `n${i} [width=${(inp.widths[i] / PT).toFixed(3)}, height=${(inp.heights[i] / PT).toFixed(3)}];`;
  const rowLines = (units: number[]) => {
    for (const i of units) {
      const row = rows.get(i);
      if (row) {
        out.push(`{rank=same; n${i}; ${row.map(j => 'n' + j).join('; ')};}`);
      }
    }
  };
  const emit = (k: number) => {
    const c = inp.clusters[k];
    out.push(`subgraph cluster_${k} {`, `label=${q(c.label)}; labeljust=l; margin=12;`);
    for (const i of members[k]) {
      out.push(nodeLine(i));
    }
    rowLines(members[k]);
    for (const ch of children[k]) {
      emit(ch);
    }
    out.push('}');
  };
  for (const k of roots) {
    emit(k);
  }
  for (const i of loose) {
    out.push(nodeLine(i));
  }
  rowLines(loose);
  for (let k = 0; k < inp.edges.length; k += 2) {
    const s = inp.edges[k];
    const t = inp.edges[k + 1];
    if (s === t) {
      continue;
    }
    // gradient edges and edges to an earlier unit follow the picture, they do not shape it
    const free = inp.grad[k / 2] || t < s;
    out.push(`n${s} -> n${t} [id=e${k / 2}${free ? ', constraint=false' : ''}];`);
  }
  out.push('}');
  return out.join('\n');
}

interface GvObject {
  name: string;
  pos?: string;
  bb?: string;
  width?: string;
  height?: string;
}

interface GvEdge {
  id?: string;
  pos?: string;
}

/** Positions, edge paths and cluster frames from Graphviz's `json0` output (y grows upwards). */
export function readLayout(inp: GvInput, json: string): GvResult {
  const g = JSON.parse(json) as { bb: string; objects?: GvObject[]; edges?: GvEdge[] };
  const [, , bw, bh] = g.bb.split(',').map(Number);
  const n = inp.ids.length;
  const x = new Array<number>(n).fill(0);
  const y = new Array<number>(n).fill(0);
  const frames: GvFrame[] = [];
  for (const o of g.objects || []) {
    if (o.name.startsWith('cluster_') && o.bb) {
      const [x0, y0, x1, y1] = o.bb.split(',').map(Number);
      const c = inp.clusters[Number(o.name.slice(8))];
      if (c) {
        frames.push({ id: c.id, x: x0, y: bh - y1, w: x1 - x0, h: y1 - y0 });
      }
    } else if (o.name.startsWith('n') && o.pos) {
      const i = Number(o.name.slice(1));
      const [cx, cy] = o.pos.split(',').map(Number);
      x[i] = cx - inp.widths[i] / 2;
      y[i] = bh - cy - inp.heights[i] / 2;
    }
  }
  const paths: (string | null)[] = new Array(inp.edges.length / 2).fill(null);
  for (const e of g.edges || []) {
    if (!e.id || !e.pos) {
      continue;
    }
    paths[Number(e.id.slice(1))] = splinePath(e.pos, bh);
  }
  return { x, y, width: bw, height: bh, count: n, engine: 'dot', paths, frames };
}

/** Graphviz's spline "e,ex,ey p1 p2 ... p3k+1" as an SVG path ending at the arrow's tip. */
export function splinePath(pos: string, bh: number): string | null {
  let end: [number, number] | null = null;
  let start: [number, number] | null = null;
  const pts: [number, number][] = [];
  for (const tok of pos.trim().split(/\s+/)) {
    const parts = tok.split(',');
    if (parts[0] === 'e') {
      end = [Number(parts[1]), bh - Number(parts[2])];
    } else if (parts[0] === 's') {
      start = [Number(parts[1]), bh - Number(parts[2])];
    } else {
      pts.push([Number(parts[0]), bh - Number(parts[1])]);
    }
  }
  if (pts.length < 4) {
    return null;
  }
  const f = (p: [number, number]) => `${p[0].toFixed(1)},${p[1].toFixed(1)}`;
  let d = (start ? `M${f(start)} L${f(pts[0])}` : `M${f(pts[0])}`);
  for (let k = 1; k + 2 < pts.length; k += 3) {
    d += ` C${f(pts[k])} ${f(pts[k + 1])} ${f(pts[k + 2])}`;
  }
  if (end) {
    d += ` L${f(end)}`;
  }
  return d;
}

/** Lay `inp` out with dot; if dot refuses the rows (a rank=same it cannot honour), without them. */
export function dotLayout(gv: GvEngine, inp: GvInput): GvResult {
  try {
    return readLayout(inp, gv.layout(toDot(inp, true), 'json0', 'dot'));
  } catch {
    return readLayout(inp, gv.layout(toDot(inp, false), 'json0', 'dot'));
  }
}
