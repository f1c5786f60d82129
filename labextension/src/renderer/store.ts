import { Delta, GEdge, GGroup, GMeta, GNode, Graph } from './types';

/** A visible unit: one node, or one collapsed group (possibly folding repeated siblings). */
export interface Unit {
  id: string;
  kind: 'node' | 'group';
  nodeKind: string; // forward | backward | leaf | group
  label: string;
  order: number; // first tape index inside: units are laid out in recording order
  count: number; // nodes inside (1 for a node)
  forward: number;
  backward: number;
  repeat: number; // > 1 when repeated sibling blocks are folded into this one
  anchor: string | null; // a backward node is drawn beside the forward unit it belongs to
  node?: GNode;
  group?: GGroup;
  match: boolean;
}

export interface UnitEdge {
  source: string;
  target: string;
  kind: 'data' | 'grad';
  count: number;
}

export interface Visible {
  units: Unit[];
  edges: UnitEdge[];
}

/**
 * Fused ops and the functions they compute inside, so a search for what users type finds them:
 * "softmax" finds the attention op that applies it (its forward and backward nodes).
 */
export const COMPUTES: Record<string, string[]> = {
  scaled_dot_product_attention: ['softmax', 'matmul', 'bmm', 'dropout'],
  cross_entropy: ['log_softmax', 'softmax', 'nll_loss'],
  log_softmax: ['softmax'],
  layer_norm: ['norm', 'mean', 'var'],
  gelu: ['erf', 'tanh'],
  linear: ['matmul', 'addmm']
};

/** Whether op `op` (a forward op, or a backward node such as SoftmaxBackward0) matches query `q`. */
export function opMatches(op: string, q: string): boolean {
  const name = op.toLowerCase();
  if (name.includes(q)) {
    return true;
  }
  const base = name.replace(/backward\d*$/, '').replace(/_/g, '');
  for (const [fused, inside] of Object.entries(COMPUTES)) {
    if ((name === fused || base === fused.replace(/_/g, '')) && inside.some(f => f.includes(q))) {
      return true;
    }
  }
  return false;
}

/** Above this many nodes groups start collapsed, and loose ops are chunked. */
export const COLLAPSE_THRESHOLD = 300;
export const CHUNK = 200;

/**
 * The graph held by one view: applies full graphs and deltas, keeps expand/collapse and
 * search state, and computes what is visible. It never touches the DOM.
 */
export class GraphStore {
  nodes: GNode[] = [];
  edges: GEdge[] = [];
  groups = new Map<string, GGroup>();
  groupOrder: string[] = [];
  meta: GMeta = { title: '', forward: 0, backward: 0, total: 0, truncated: false };
  userExpanded = new Map<string, boolean>();
  fold = true;
  query = '';
  version = 0;
  private byId = new Map<string, GNode>();
  private bySeq = new Map<number, GNode>();
  private leafOrder = new Map<string, number>();
  private listeners: (() => void)[] = [];

  onChange(fn: () => void): () => void {
    this.listeners.push(fn);
    return () => {
      this.listeners = this.listeners.filter(f => f !== fn);
    };
  }

  private changed(): void {
    this.version++;
    for (const fn of this.listeners) {
      fn();
    }
  }

  clear(): void {
    this.nodes = [];
    this.edges = [];
    this.groups.clear();
    this.groupOrder = [];
    this.byId.clear();
    this.bySeq.clear();
    this.leafOrder.clear();
    this.meta = { title: '', forward: 0, backward: 0, total: 0, truncated: false };
    this.changed();
  }

  setGraph(g: Graph): void {
    this.nodes = [];
    this.edges = [];
    this.groups.clear();
    this.groupOrder = [];
    this.byId.clear();
    this.bySeq.clear();
    this.leafOrder.clear();
    this.apply(g as Delta);
  }

  /** Append a delta (new nodes, edges, groups; updates to earlier nodes and groups). */
  apply(d: Delta): void {
    for (const g of d.groups || []) {
      if (!this.groups.has(g.id)) {
        this.groupOrder.push(g.id);
      }
      this.groups.set(g.id, { ...g });
    }
    let last = this.nodes.length ? this.order(this.nodes[this.nodes.length - 1]) : 0;
    for (const n of d.nodes || []) {
      if (this.byId.has(n.id)) {
        continue;
      }
      this.nodes.push(n);
      this.byId.set(n.id, n);
      if (n.kind === 'forward' && n.seq !== null && n.seq !== undefined) {
        this.bySeq.set(n.seq, n);
      }
      if (n.index === null || n.index === undefined) {
        this.leafOrder.set(n.id, last + 0.5); // a leaf sorts just before its first consumer
      } else {
        last = n.index;
      }
    }
    for (const e of d.edges || []) {
      this.edges.push(e);
    }
    for (const u of d.updates || []) {
      const target: any = this.byId.get(u.id) || this.groups.get(u.id);
      if (target) {
        Object.assign(target, u);
      }
    }
    if (d.meta) {
      this.meta = d.meta;
    }
    this.changed();
  }

  node(id: string): GNode | undefined {
    return this.byId.get(id);
  }

  order(n: GNode): number {
    if (n.index !== null && n.index !== undefined) {
      return n.index;
    }
    return this.leafOrder.get(n.id) ?? 0;
  }

  defaultExpanded(): boolean {
    return this.nodes.length <= COLLAPSE_THRESHOLD;
  }

  isExpanded(gid: string): boolean {
    const u = this.userExpanded.get(gid);
    if (u !== undefined) {
      return u;
    }
    return !this.groups.get(gid)?.collapsed && this.defaultExpanded();
  }

  setExpanded(gid: string, on: boolean): void {
    this.userExpanded.set(gid, on);
    this.changed();
  }

  toggle(gid: string): void {
    this.setExpanded(gid, !this.isExpanded(gid));
  }

  expandAll(on: boolean): void {
    for (const gid of this.allGroupIds()) {
      this.userExpanded.set(gid, on);
    }
    this.changed();
  }

  setQuery(q: string): void {
    this.query = q.trim().toLowerCase();
    this.changed();
  }

  matches(n: GNode): boolean {
    const q = this.query;
    return !!q && (opMatches(n.op, q) || (n.module || '').toLowerCase().includes(q));
  }

  /**
   * What a search finds, in recording order, each once: the outermost group whose path (or
   * label) contains the query, and each node whose op contains it outside such a group.
   * Ids are group ids (``g:...``) or node ids; ``reveal`` makes one of them visible.
   */
  searchTargets(): string[] {
    const q = this.query;
    if (!q) {
      return [];
    }
    const out: string[] = [];
    const seen = new Set<string>();
    const groupHit = (gid: string | null): string | null => {
      let hit: string | null = null;
      while (gid) {
        const g = this.groups.get(gid);
        if (!g) {
          break;
        }
        if ((g.path || g.label).toLowerCase().includes(q)) {
          hit = gid; // keep walking: the outermost matching group wins
        }
        gid = g.parent;
      }
      return hit;
    };
    const cache = new Map<string | null, string | null>();
    for (const n of this.nodes) {
      let hit = cache.get(n.group);
      if (hit === undefined) {
        hit = groupHit(n.group);
        cache.set(n.group, hit);
      }
      const id = hit ?? (opMatches(n.op, q) ? n.id : null);
      if (id !== null && !seen.has(id)) {
        seen.add(id);
        out.push(id);
      }
    }
    return out;
  }

  /**
   * Make a node or group visible: expand the groups around it (a group itself stays as it is),
   * the chunk of loose ops holding a node, and unfold repeated blocks if it is folded away.
   * Returns the id of the unit or frame to pan to: the node, or the group's id.
   */
  reveal(id: string): string {
    const expand = new Set<string>();
    let gid: string | null = null;
    const n = this.byId.get(id);
    if (n) {
      gid = n.group;
      if (gid === null && this.chunking()) {
        let ord = 0;
        for (const m of this.nodes) {
          if (m.group === null) {
            if (m.id === id) {
              expand.add('c:' + Math.floor(ord / CHUNK));
              break;
            }
            ord++;
          }
        }
      }
    } else {
      gid = this.groups.get(id)?.parent ?? null;
    }
    while (gid) {
      expand.add(gid);
      gid = this.groups.get(gid)?.parent ?? null;
    }
    for (const g of expand) {
      if (!this.isExpanded(g)) {
        this.userExpanded.set(g, true);
      }
    }
    if (this.fold && !n) {
      const vis = this.visible();
      if (!this.isExpanded(id) && !vis.units.some(u => u.id === id)) {
        this.fold = false; // a repeated block folded into an earlier one: show the blocks
      }
    }
    this.changed();
    return id;
  }

  /** Ids of every group, the synthetic chunks of loose ops included. */
  allGroupIds(): string[] {
    const ids = [...this.groupOrder];
    if (this.chunking()) {
      const seen = new Set<string>();
      let ord = 0;
      for (const n of this.nodes) {
        if (n.group === null) {
          const c = 'c:' + Math.floor(ord++ / CHUNK);
          if (!seen.has(c)) {
            seen.add(c);
            ids.push(c);
          }
        }
      }
    }
    return ids;
  }

  private chunking(): boolean {
    return this.nodes.length > COLLAPSE_THRESHOLD;
  }

  /**
   * What is drawn: every node is represented by itself or by its outermost collapsed group;
   * collapsed sibling groups with equal signatures fold into the first of their run.
   * O(nodes + edges); the layout only ever sees the result.
   */
  visible(): Visible {
    const chunk = this.chunking();
    // synthetic groups for loose ops of a big tape, CHUNK consecutive nodes each
    const synthetic = new Map<string, GGroup>();
    const nodeGroup = new Map<string, string | null>();
    let ord = 0;
    for (const n of this.nodes) {
      let g = n.group;
      if (g === null && chunk) {
        const k = Math.floor(ord++ / CHUNK);
        g = 'c:' + k;
        if (!synthetic.has(g)) {
          synthetic.set(g, { id: g, label: `ops ${k * CHUNK}–${k * CHUNK + CHUNK - 1}`, path: '', parent: null, signature: '', size: 0 });
        }
        synthetic.get(g)!.size++;
      }
      nodeGroup.set(n.id, g);
    }
    const group = (gid: string) => this.groups.get(gid) || synthetic.get(gid);
    // fold: collapsed siblings with the signature of the previous sibling map to the run's head
    const foldTo = new Map<string, string>();
    const repeat = new Map<string, number>();
    if (this.fold) {
      const lastChild = new Map<string | null, GGroup>();
      const head = new Map<string, string>();
      for (const gid of this.groupOrder) {
        const g = this.groups.get(gid)!;
        const prev = lastChild.get(g.parent);
        lastChild.set(g.parent, g);
        if (prev && g.signature && prev.signature === g.signature && !this.isExpanded(gid) && !this.isExpanded(prev.id)) {
          const h = head.get(prev.id) || prev.id;
          head.set(gid, h);
          foldTo.set(gid, h);
          repeat.set(h, (repeat.get(h) || 1) + 1);
        }
      }
    }
    // representative of each group: its outermost collapsed ancestor (or itself), or null
    const repOfGroup = new Map<string, string | null>();
    const rep = (gid: string | null): string | null => {
      if (gid === null) {
        return null;
      }
      const known = repOfGroup.get(gid);
      if (known !== undefined) {
        return known;
      }
      const g = group(gid);
      const up = g ? rep(g.parent) : null;
      let r: string | null = up;
      if (up === null && !this.isExpanded(gid)) {
        r = foldTo.get(gid) || gid;
      }
      repOfGroup.set(gid, r);
      return r;
    };
    const units = new Map<string, Unit>();
    const nodeRep = new Map<string, string>();
    for (const n of this.nodes) {
      const r = rep(nodeGroup.get(n.id) ?? null);
      const m = this.matches(n);
      if (r === null) {
        nodeRep.set(n.id, n.id);
        units.set(n.id, {
          id: n.id, kind: 'node', nodeKind: n.kind, label: n.label, order: this.order(n), count: 1,
          forward: n.kind === 'forward' ? 1 : 0, backward: n.kind === 'backward' ? 1 : 0, repeat: 1,
          anchor: null, node: n, match: m
        });
      } else {
        nodeRep.set(n.id, r);
        let u = units.get(r);
        if (!u) {
          const g = group(r)!;
          u = {
            id: r, kind: 'group', nodeKind: 'group', label: g.path || g.label, order: this.order(n), count: 0,
            forward: 0, backward: 0, repeat: repeat.get(r) || 1, anchor: null, group: g, match: false
          };
          units.set(r, u);
        }
        u.count++;
        if (n.kind === 'forward') {
          u.forward++;
        } else if (n.kind === 'backward') {
          u.backward++;
        }
        u.match = u.match || m || (!!this.query && (u.label.toLowerCase().includes(this.query)));
      }
    }
    // a loose backward node sits beside its forward op (AccumulateGrad beside its leaf)
    const edges = new Map<string, UnitEdge>();
    for (const e of this.edges) {
      const s = nodeRep.get(e.source);
      const t = nodeRep.get(e.target);
      if (s === undefined || t === undefined || s === t) {
        continue;
      }
      const key = s + '>' + t;
      const ue = edges.get(key);
      if (ue) {
        ue.count++;
      } else {
        edges.set(key, { source: s, target: t, kind: e.kind, count: 1 });
      }
    }
    const sinkLeaf = new Map<string, string>();
    for (const e of this.edges) {
      if (e.kind === 'grad' && this.byId.get(e.target)?.kind === 'leaf') {
        sinkLeaf.set(e.source, e.target);
      }
    }
    for (const u of units.values()) {
      const n = u.node;
      if (!n || n.kind !== 'backward') {
        continue;
      }
      if (n.forward_seq !== null && n.forward_seq !== undefined) {
        const f = this.bySeq.get(n.forward_seq);
        const a = f ? nodeRep.get(f.id) : undefined;
        if (a !== undefined && a !== u.id) {
          u.anchor = a;
        }
      } else {
        const leaf = sinkLeaf.get(n.id);
        const a = leaf ? nodeRep.get(leaf) : undefined;
        if (a !== undefined && a !== u.id) {
          u.anchor = a;
        }
      }
    }
    const list = [...units.values()].sort((a, b) => a.order - b.order);
    return { units: list, edges: [...edges.values()] };
  }
}
