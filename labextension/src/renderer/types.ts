/** The tapelab graph schema (version 1), as widgets/viewmodel.py writes it. */
export const GRAPH_MIME = 'application/vnd.tapelab.graph+json';

export interface Summary {
  min: number | null;
  max: number | null;
  mean: number | null;
  std: number | null;
  norm: number | null;
  nan: number;
  inf: number;
}

export interface GNode {
  id: string;
  kind: 'forward' | 'backward' | 'leaf';
  label: string;
  op: string;
  index: number | null;
  seq: number | null;
  forward_seq: number | null;
  group: string | null;
  module: string;
  shape: number[] | null;
  input_shapes: (number[] | null)[];
  dtype: string;
  device: string;
  requires_grad: boolean;
  start_ns: number;
  time_ns: number;
  value: Summary | null;
  grad: Summary | null;
  grad_ops: number;
  source?: string; // "file.py:42": the line that ran the op, when the recorder knows it
  param?: string; // a leaf that is a module parameter: its qualified name
}

export interface GEdge {
  source: string;
  target: string;
  kind: 'data' | 'grad';
  shape: number[] | null;
}

export interface GGroup {
  id: string;
  label: string;
  path: string;
  parent: string | null;
  signature: string;
  size: number;
  collapsed?: boolean; // a hint: start collapsed (no-grad runs such as an optimizer step)
}

export interface GMeta {
  title: string;
  forward: number;
  backward: number;
  total: number;
  truncated: boolean;
  steps?: number;   // training steps seen (a step starts at the first graph-building op after a backward)
  folded?: number;  // steps that repeated the last one shown: counted, not drawn (their values update it)
}

export interface Graph {
  schema?: string;
  version?: number;
  nodes: GNode[];
  edges: GEdge[];
  groups: GGroup[];
  meta?: GMeta;
}

export interface Delta extends Graph {
  updates?: ({ id: string } & Record<string, unknown>)[];
}
