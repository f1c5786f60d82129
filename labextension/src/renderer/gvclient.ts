/**
 * Graphviz layouts through one service for the page, reached on `document` (a DOM event, so the
 * anywidget bundle, which does not carry Graphviz's WebAssembly, uses the worker the
 * labextension's bundle starts; see gvservice.ts). `graphvizLayout` resolves to null when no
 * service answers, the graph is too large, or the worker failed: the caller keeps the hand layout.
 */
import { GvInput, GvResult } from './gvlayout';

/** Above this many units dot's time grows past interactive: the hand layout draws them. */
export const GV_MAX_UNITS = 1500;

export type GvReply = (GvResult & { ms: number }) | null;

/** The event a view dispatches; the first service listening sets `reply`. */
const LAYOUT = 'tapelab-graphviz-layout';

interface LayoutRequest {
  input: GvInput;
  reply: Promise<GvReply> | null;
}

type Reply = { id: number; result?: GvResult & { ms: number }; error?: string };

/** One Graphviz web worker, started on first use from its bundled source. */
class GvWorker {
  private worker: Worker | null = null;
  private failed = false;
  private nextId = 0;
  private pending = new Map<number, (r: GvReply) => void>();

  constructor(private source: string) {}

  private start(): Worker | null {
    if (this.worker || this.failed) {
      return this.worker;
    }
    try {
      const url = URL.createObjectURL(new Blob([this.source], { type: 'text/javascript' }));
      this.worker = new Worker(url);
      this.worker.onmessage = (e: MessageEvent<Reply>) => {
        const cb = this.pending.get(e.data.id);
        this.pending.delete(e.data.id);
        if (e.data.error) {
          console.warn('tapelab: graphviz layout failed, keeping the hand layout:', e.data.error);
        }
        cb?.(e.data.result ?? null);
      };
      this.worker.onerror = ev => {
        console.warn('tapelab: the graphviz worker failed, keeping the hand layout', ev.message);
        this.failed = true;
        this.worker?.terminate();
        this.worker = null;
        for (const cb of this.pending.values()) {
          cb(null);
        }
        this.pending.clear();
      };
    } catch {
      this.failed = true;
      this.worker = null;
    }
    return this.worker;
  }

  layout(input: GvInput): Promise<GvReply> {
    if (typeof Worker === 'undefined' || typeof Blob === 'undefined') {
      return Promise.resolve(null);
    }
    const w = this.start();
    if (!w) {
      return Promise.resolve(null);
    }
    const id = this.nextId++;
    return new Promise(resolve => {
      this.pending.set(id, resolve);
      w.postMessage({ id, input });
    });
  }
}

/**
 * Serve Graphviz layouts to every view on `doc` from a worker started (on the first request)
 * from `workerSource`. When several bundles serve, the first listener answers and only its
 * worker starts. Returns the function that stops serving.
 */
export function serveGraphviz(workerSource: string, doc: Document = document): () => void {
  const worker = new GvWorker(workerSource);
  const serve = (e: Event) => {
    const d = (e as CustomEvent<LayoutRequest>).detail;
    if (!d.reply) {
      d.reply = worker.layout(d.input);
    }
  };
  doc.addEventListener(LAYOUT, serve);
  return () => doc.removeEventListener(LAYOUT, serve);
}

/** Lay out with the page's Graphviz service; null means "use the hand layout". */
export function graphvizLayout(input: GvInput, doc?: Document): Promise<GvReply> {
  const d = doc ?? (typeof document === 'undefined' ? null : document);
  if (!d || input.ids.length > GV_MAX_UNITS) {
    return Promise.resolve(null);
  }
  const detail: LayoutRequest = { input, reply: null };
  d.dispatchEvent(new CustomEvent(LAYOUT, { detail }));
  return detail.reply ?? Promise.resolve(null);
}
