// Unit tests of the renderer's model and layout (no DOM): run by node's test runner, from
// tests/test_renderer_js.py.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { COLLAPSE_THRESHOLD, GraphStore } from '../src/renderer/store';
import { computeLayout, LayoutClient, LayoutInput } from '../src/renderer/layout';
import { GEdge, GGroup, GNode, Graph } from '../src/renderer/types';

function node(i: number, op: string, group: string | null, kind: GNode['kind'] = 'forward'): GNode {
  return {
    id: 'n' + i, kind, label: op, op, index: i, seq: kind === 'forward' ? i : null, forward_seq: null, group,
    module: group ? group.slice(2) : '', shape: [4, 4], input_shapes: [], dtype: 'float32', device: 'cpu',
    requires_grad: true, start_ns: 0, time_ns: 1000, value: null, grad: null, grad_ops: 0
  };
}

/** A tape of `blocks` identical blocks of `per` ops each, chained, under layers.<k>. */
function blockTape(blocks: number, per: number): Graph {
  const nodes: GNode[] = [];
  const edges: GEdge[] = [];
  const groups: GGroup[] = [{ id: 'g:layers', label: 'layers', path: 'layers', parent: null, signature: 'L', size: blocks * per }];
  for (let b = 0; b < blocks; b++) {
    groups.push({ id: `g:layers.${b}`, label: String(b), path: `layers.${b}`, parent: 'g:layers', signature: 'S', size: per });
    for (let k = 0; k < per; k++) {
      const i = b * per + k;
      nodes.push(node(i, k % 2 ? 'relu' : 'matmul', `g:layers.${b}`));
      if (i > 0) {
        edges.push({ source: 'n' + (i - 1), target: 'n' + i, kind: 'data', shape: [4, 4] });
      }
    }
  }
  return { nodes, edges, groups, meta: { title: '', forward: nodes.length, backward: 0, total: nodes.length, truncated: false } };
}

function layoutInput(store: GraphStore): LayoutInput {
  const vis = store.visible();
  const index = new Map(vis.units.map((u, i) => [u.id, i] as [string, number]));
  return {
    ids: vis.units.map(u => u.id),
    widths: vis.units.map(() => 100),
    heights: vis.units.map(() => 30),
    backward: vis.units.map(u => u.nodeKind === 'backward'),
    anchors: vis.units.map(u => (u.anchor ? index.get(u.anchor) ?? -1 : -1)),
    edges: vis.edges.flatMap(e => [index.get(e.source)!, index.get(e.target)!])
  };
}

test('a 5,000-node tape lays out only its visible units, never hidden nodes', async () => {
  const store = new GraphStore();
  store.setGraph(blockTape(50, 100));
  assert.equal(store.nodes.length, 5000);
  const client = new LayoutClient(false);
  const input = layoutInput(store);
  const res = await client.layout(input); // resolves when the layout is done: no clock involved
  // collapsed by default (> threshold) and the 50 identical blocks fold into one
  assert.equal(res.count, input.ids.length);
  assert.equal(client.laidOut, 1, `laid out ${client.laidOut} units`);
  assert.ok(input.ids.every(id => !id.startsWith('n')), 'no hidden node was laid out');
  const vis = store.visible();
  assert.equal(vis.units[0].count, 5000);

  // expanding the outer group shows the blocks (folded into one run), still no op nodes
  store.setExpanded('g:layers', true);
  const v2 = store.visible();
  assert.equal(v2.units.length, 1);
  assert.equal(v2.units[0].repeat, 50);
  // without folding: 50 block units, chained by 49 edges
  store.fold = false;
  const v3 = store.visible();
  assert.equal(v3.units.length, 50);
  assert.equal(v3.edges.length, 49);
  // expanding one block shows its 100 ops and nothing else of the other 4,900
  store.setExpanded('g:layers.7', true);
  const v4 = store.visible();
  assert.equal(v4.units.length, 49 + 100);
  const inp = layoutInput(store);
  const before = client.laidOut;
  await client.layout(inp);
  assert.equal(client.laidOut - before, 149);
  assert.ok(inp.ids.filter(id => id.startsWith('n')).every(id => {
    const i = Number(id.slice(1));
    return i >= 700 && i < 800;
  }));
});

test('a flat 5,000-node tape is chunked instead of laid out whole', () => {
  const store = new GraphStore();
  const nodes = Array.from({ length: 5000 }, (_, i) => node(i, 'add', null));
  const edges = nodes.slice(1).map((n, i) => ({ source: 'n' + i, target: n.id, kind: 'data' as const, shape: null }));
  store.setGraph({ nodes, edges, groups: [] });
  const vis = store.visible();
  assert.equal(vis.units.length, 25);
  assert.ok(vis.units.every(u => u.kind === 'group' && u.count === 200));
  assert.equal(vis.edges.length, 24);
});

test('small tapes start expanded; collapse is per group', () => {
  const store = new GraphStore();
  store.setGraph(blockTape(2, 5));
  assert.ok(store.nodes.length <= COLLAPSE_THRESHOLD);
  assert.equal(store.visible().units.length, 10);
  store.setExpanded('g:layers.1', false);
  const vis = store.visible();
  assert.equal(vis.units.length, 6);
  assert.equal(vis.units[5].id, 'g:layers.1');
  assert.equal(vis.units[5].count, 5);
});

test('deltas append; updates patch earlier nodes; same result as one graph', () => {
  const g = blockTape(3, 10);
  const a = new GraphStore();
  a.setGraph(g);
  const b = new GraphStore();
  b.apply({ nodes: [], edges: [], groups: g.groups });
  for (let i = 0; i < g.nodes.length; i += 7) {
    const ids = new Set(g.nodes.slice(i, i + 7).map(n => n.id));
    b.apply({ nodes: g.nodes.slice(i, i + 7), edges: g.edges.filter(e => ids.has(e.target)), groups: [] });
  }
  assert.deepEqual(b.visible(), a.visible());
  b.apply({ nodes: [], edges: [], groups: [], updates: [{ id: 'n3', grad_ops: 4 }] });
  assert.equal(b.node('n3')!.grad_ops, 4);
  const v0 = b.version;
  b.apply({ nodes: [g.nodes[0]], edges: [], groups: [] }); // a repeated node is ignored
  assert.equal(b.nodes.length, 30);
  assert.ok(b.version > v0);
});

test('search marks nodes and the collapsed groups holding them', () => {
  const store = new GraphStore();
  store.setGraph(blockTape(50, 100));
  store.fold = false;
  store.setExpanded('g:layers', true);
  store.setQuery('layers.3');
  const hits = store.visible().units.filter(u => u.match).map(u => u.id);
  assert.ok(hits.includes('g:layers.3') && hits.includes('g:layers.30'));
  store.setQuery('RELU');
  assert.equal(store.visible().units.filter(u => u.match).length, 50);
  store.setQuery('');
  assert.equal(store.visible().units.filter(u => u.match).length, 0);
});

test('search targets: outermost matching group once, ops outside matching groups; reveal expands and unfolds', () => {
  const store = new GraphStore();
  store.setGraph(blockTape(50, 100)); // 5,000 nodes: groups start collapsed, repeated blocks fold
  store.setQuery('layers.3');
  // 'layers.3' matches layers.3 and layers.30-39, each once (layers itself does not match)
  assert.deepEqual(store.searchTargets(), ['g:layers.3', ...Array.from({ length: 10 }, (_, k) => `g:layers.3${k}`)]);
  assert.ok(!store.visible().units.some(u => u.id === 'g:layers.31'));
  store.reveal('g:layers.31');
  assert.ok(store.isExpanded('g:layers') && !store.isExpanded('g:layers.31'));
  assert.ok(store.visible().units.some(u => u.id === 'g:layers.31'), 'folded block shown');
  // an op inside a collapsed group: its groups expand so the node itself is drawn
  store.setQuery('relu');
  const t = store.searchTargets();
  assert.equal(t.length, 2500);
  store.reveal(t[1234]);
  assert.ok(store.visible().units.some(u => u.id === t[1234]));
  // a loose op in a chunk of a big flat tape
  const flat = new GraphStore();
  const g = blockTape(1, 1000);
  g.nodes.forEach(n => { n.group = null; n.module = ''; });
  g.groups = [];
  flat.setGraph(g);
  flat.setQuery('relu');
  const id = flat.searchTargets()[400];
  assert.ok(!flat.visible().units.some(u => u.id === id));
  flat.reveal(id);
  assert.ok(flat.visible().units.some(u => u.id === id));
});

test('layout ranks follow the data, backward units sit beside their forward unit, appends are stable', () => {
  const inp: LayoutInput = {
    ids: ['a', 'b', 'c', 'bc', 'bb'], widths: [100, 100, 100, 100, 100], heights: [30, 30, 30, 30, 30],
    backward: [false, false, false, true, true], anchors: [-1, -1, -1, 2, 1], edges: [0, 1, 1, 2, 3, 4]
  };
  const r = computeLayout(inp);
  assert.ok(r.y[0] < r.y[1] && r.y[1] < r.y[2]);
  assert.equal(r.y[3], r.y[2]);
  assert.equal(r.y[4], r.y[1]);
  assert.ok(r.x[3] > r.x[2] + 100);
  const more = computeLayout({ ...inp, ids: [...inp.ids.slice(0, 3), 'd', ...inp.ids.slice(3)], widths: [...inp.widths, 100],
    heights: [...inp.heights, 30], backward: [false, false, false, false, true, true], anchors: [-1, -1, -1, -1, 2, 1],
    edges: [0, 1, 1, 2, 2, 3, 4, 5] });
  assert.deepEqual([more.y[0], more.y[1], more.y[2]], [r.y[0], r.y[1], r.y[2]]);
  assert.ok(more.y[3] > more.y[2]);
});

test('the worker source is self-contained', () => {
  const src = `const computeLayout = ${computeLayout.toString()}; return computeLayout;`;
  // eslint-disable-next-line no-new-func
  const fn = new Function(src)() as typeof computeLayout;
  const r = fn({ ids: ['a', 'b'], widths: [10, 10], heights: [10, 10], backward: [false, false], anchors: [-1, -1], edges: [0, 1] });
  assert.equal(r.count, 2);
});
