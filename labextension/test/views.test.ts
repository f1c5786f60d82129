// Unit tests of the Graphviz layout, the picture measures, the minimap's geometry and the
// selection bus (no browser): run by node's test runner, from tests/test_renderer_js.py.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Graphviz } from '@hpcc-js/wasm-graphviz';
import { computeLayout } from '../src/renderer/layout';
import { dotLayout, GvInput, splinePath, toDot } from '../src/renderer/gvlayout';
import { countCrossings, countOverlaps } from '../src/renderer/measure';
import { fitsInView, mapTransform } from '../src/renderer/minimap';
import { drawBulk, hitTest } from '../src/renderer/bulk';
import { describeSelection, matchNode, onSelection, publishSelection, SelectionKey, selectionKey } from '../src/renderer/selection';
import { GNode } from '../src/renderer/types';
import { GraphStore, opMatches } from '../src/renderer/store';

/** Two blocks of a residual stack (x -> f -> add(x, f) twice), each op with a parameter, in clusters. */
function residual(): GvInput {
  const ids: string[] = [];
  const edges: number[] = [];
  const cluster: number[] = [];
  const unit = (id: string, c: number) => {
    ids.push(id);
    cluster.push(c);
    return ids.length - 1;
  };
  let x = unit('x', -1);
  const clusters = [{ id: 'g:layers.0', label: 'layers.0', parent: -1 }, { id: 'g:layers.1', label: 'layers.1', parent: -1 }];
  for (let b = 0; b < 2; b++) {
    const w = unit(`w${b}`, b);
    const mm = unit(`mm${b}`, b);
    const relu = unit(`relu${b}`, b);
    const add = unit(`add${b}`, b);
    edges.push(x, mm, w, mm, mm, relu, relu, add, x, add);
    x = add;
  }
  return {
    ids, widths: ids.map(() => 128), heights: ids.map(() => 34), backward: ids.map(() => false), anchors: ids.map(() => -1),
    edges, cluster, clusters, grad: new Array(edges.length / 2).fill(false)
  };
}

test('dot lays a clustered residual graph out without overlaps, with frames and edge paths', async () => {
  const gv = await Graphviz.load();
  const inp = residual();
  const dot = toDot(inp);
  assert.match(dot, /subgraph cluster_0/);
  assert.match(dot, /rank=same; n2; n1/); // the parameter w0 on the row of its matmul
  const r = dotLayout(gv, inp);
  assert.equal(r.engine, 'dot');
  assert.equal(r.count, inp.ids.length);
  const boxes = { x: r.x, y: r.y, widths: inp.widths, heights: inp.heights };
  assert.equal(countOverlaps(boxes), 0);
  assert.equal(r.y[2], r.y[1], 'parameter beside the op that uses it');
  assert.ok(r.y[3] > r.y[2] && r.y[4] > r.y[3], 'data flows down');
  assert.equal(r.frames.length, 2);
  for (const f of r.frames) {
    const members = inp.ids.map((_, i) => i).filter(i => inp.cluster[i] === inp.clusters.findIndex(c => c.id === f.id));
    for (const i of members) {
      assert.ok(r.x[i] >= f.x && r.x[i] + inp.widths[i] <= f.x + f.w && r.y[i] >= f.y && r.y[i] + inp.heights[i] <= f.y + f.h,
        `unit ${inp.ids[i]} inside frame ${f.id}`);
    }
  }
  assert.ok(r.paths.every(p => p !== null && p.startsWith('M')), 'every edge has a spline');
  // the residual edge is routed beside the chain: no crossing, and no more than the hand layout's
  const hand = computeLayout(inp);
  const dotX = countCrossings(boxes, inp.edges);
  const handX = countCrossings({ x: hand.x, y: hand.y, widths: inp.widths, heights: inp.heights }, inp.edges);
  assert.ok(dotX <= handX, `dot ${dotX} crossings, hand ${handX}`);
});

test('cluster labels are escaped in DOT; a rank=same that dot refuses falls back to plain ranks', () => {
  const inp = residual();
  inp.clusters[0].label = 'a "quoted" \\ label';
  assert.match(toDot(inp), /label="a \\"quoted\\" \\\\ label"/);
  let calls = 0;
  const fake = {
    layout(dot: string) {
      calls++;
      if (dot.includes('rank=same')) {
        throw new Error('trouble in init_rank');
      }
      return JSON.stringify({ bb: '0,0,100,100', objects: [{ name: 'n0', pos: '50,50' }], edges: [] });
    }
  };
  const r = dotLayout(fake, inp);
  assert.equal(calls, 2);
  assert.equal(r.x[0], 50 - 64);
});

test('splines: Graphviz y grows upwards, the path ends at the arrow tip', () => {
  assert.equal(splinePath('e,10,0 10,90 10,60 10,40 10,20', 100), 'M10.0,10.0 C10.0,40.0 10.0,60.0 10.0,80.0 L10.0,100.0');
  assert.equal(splinePath('1,2 3,4', 10), null);
});

test('crossings and overlaps are counted on box centres', () => {
  // an X: a(0,0) -> d(100,100), b(100,0) -> c(0,100)
  const b = { x: [0, 100, 0, 100], y: [0, 0, 100, 100], widths: [10, 10, 10, 10], heights: [10, 10, 10, 10] };
  assert.equal(countCrossings(b, [0, 3, 1, 2]), 1);
  assert.equal(countCrossings(b, [0, 2, 1, 3]), 0);
  assert.equal(countCrossings(b, [0, 3, 0, 2]), 0, 'edges sharing an end do not cross');
  assert.equal(countOverlaps(b), 0);
  assert.equal(countOverlaps({ x: [0, 5, 200], y: [0, 5, 0], widths: [10, 10, 10], heights: [10, 10, 10] }), 1);
});

test('minimap: the picture fits the map, centred; no map when all is in view', () => {
  const t = mapTransform({ x: 100, y: 0, w: 1000, h: 100 }, 200, 100);
  assert.equal(t.s, 0.2);
  assert.equal(100 * t.s + t.ox, 0);
  assert.equal(50 * t.s + t.oy, 50);
  assert.ok(fitsInView({ x: 0, y: 0, w: 10, h: 10 }, { x: -5, y: -5, w: 30, h: 30 }));
  assert.ok(!fitsInView({ x: 0, y: 0, w: 100, h: 10 }, { x: 0, y: 0, w: 50, h: 50 }));
});

function gnode(id: string, kind: GNode['kind'], op: string, module: string, seq: number | null, fseq: number | null = null): GNode {
  return {
    id, kind, label: op, op, index: 0, seq, forward_seq: fseq, group: null, module, shape: null, input_shapes: [],
    dtype: '', device: '', requires_grad: true, start_ns: 0, time_ns: 0, value: null, grad: null, grad_ops: 0
  };
}

test('selection keys: tape seq within one recording, module and op across graphs', () => {
  const tape = [gnode('n1', 'forward', 'linear', 'encoder.linear1', 7), gnode('b1', 'backward', 'LinearBackward', 'encoder.linear1', null, 7)];
  const fx = [gnode('fx:x', 'leaf', 'x', '', null), gnode('fx:encoder_linear1', 'forward', 'linear', 'encoder.linear1', null)];
  const key = selectionKey(tape[0], 'tape', 'v1');
  assert.equal(key.seq, 7);
  assert.equal(matchNode(tape, key, 'tape')!.id, 'n1');
  assert.equal(matchNode(fx, key, 'fx')!.id, 'fx:encoder_linear1');
  assert.equal(matchNode(tape, selectionKey(tape[1], 'tape', 'v1'), 'tape')!.id, 'b1');
  // an FX key has no seq: the tape finds the op by module and name
  const k2 = selectionKey(fx[1], 'fx', 'v2');
  assert.equal(k2.seq, null);
  assert.equal(matchNode(tape, k2, 'tape')!.id, 'n1');
});

test('the bus: other views hear a selection and describe the op; a view ignores its own', () => {
  const doc = new EventTarget() as unknown as Document;
  const heard: (SelectionKey | null)[] = [];
  const own: (SelectionKey | null)[] = [];
  const off = onSelection('profile', k => heard.push(k), () => [['profile time', '3 ms'], ['memory', '']], doc);
  const off2 = onSelection('tape', k => own.push(k), () => [['tape value', 'min 0']], doc);
  const key: SelectionKey = { seq: 3, phase: 'forward', module: 'm', op: 'add', name: 'add', origin: 'tape' };
  publishSelection(key, 'tape', doc);
  assert.deepEqual(heard, [key]);
  assert.deepEqual(own, []);
  assert.deepEqual(describeSelection(key, doc), [['profile time', '3 ms']]);
  off();
  off2();
  publishSelection(null, 'tape', doc);
  assert.equal(heard.length, 1);
});

test('bulk drawing: only units in view are drawn, marks outline them; hit testing finds the unit', () => {
  const units = Array.from({ length: 1000 }, (_, i) => ({
    id: 'u' + i, kind: 'node' as const, nodeKind: 'forward', label: 'op', order: i, count: 1, forward: 1, backward: 0,
    repeat: 1, anchor: null, match: false, node: gnode('u' + i, 'forward', 'matmul', '', i)
  }));
  const pos = new Map(units.map((u, i) => [u.id, { x: (i % 10) * 150, y: Math.floor(i / 10) * 60, w: 128, h: 34 }]));
  const edges = units.slice(1).map((u, i) => ({ source: 'u' + i, target: u.id, kind: 'data' as const, count: 1 }));
  const calls: string[] = [];
  const ctx = new Proxy({} as Record<string, unknown>, {
    get: (t, k) => (k in t ? t[k as string] : (...a: unknown[]) => calls.push(`${String(k)}(${a.join(',')})`)),
    set: (t, k, v) => { t[k as string] = v; return true; }
  });
  // an 800 x 400 view at scale 1, with its 50 px margin, meets columns 0..5 of rows 0..7
  const n = drawBulk(ctx as never, { tx: 0, ty: 0, scale: 1, W: 800, H: 400 }, 1, units, edges, pos, new Map([['u3', '#dc2626']]), 12);
  assert.equal(n, 48);
  assert.ok(calls.filter(c => c.startsWith('fillRect')).length === n);
  assert.ok(calls.some(c => c.startsWith('fillText(matmul')), 'op names at a readable zoom');
  const far = drawBulk(ctx as never, { tx: 0, ty: 0, scale: 0.05, W: 800, H: 400 }, 1, units, edges, pos, new Map(), 12);
  assert.equal(far, 1000);
  assert.equal(hitTest(units, pos, 160, 70)!.id, 'u11');
  assert.equal(hitTest(units, pos, 140, 70), null);
});

test('search finds what users type inside fused ops: softmax in attention, forward and backward', () => {
  assert.ok(opMatches('scaled_dot_product_attention', 'softmax'));
  assert.ok(opMatches('ScaledDotProductAttentionBackward0', 'softmax'));
  assert.ok(opMatches('cross_entropy', 'log_softmax'));
  assert.ok(opMatches('softmax', 'softmax') && opMatches('SoftmaxBackward0', 'softmax'));
  assert.ok(!opMatches('matmul', 'softmax'));
  assert.ok(!opMatches('relu', 'norm'));
  const store = new GraphStore();
  store.setGraph({ nodes: [gnode('a', 'forward', 'scaled_dot_product_attention', 'layers.0.self_attn', 1), gnode('b', 'forward', 'relu', '', 2)],
    edges: [], groups: [] });
  store.setQuery('softmax');
  assert.deepEqual(store.searchTargets(), ['a']);
});

test('a module name in the query does not match fused ops by a shorter inner name', () => {
  assert.ok(!opMatches('layer_norm', 'norm1'));
  assert.ok(opMatches('layer_norm', 'norm'));
});
