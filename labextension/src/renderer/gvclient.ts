/**
 * One Graphviz web worker for the page, started on first use from its bundled source. `layout`
 * resolves to null when there is no worker or it failed (the caller keeps the hand layout).
 */
import { GV_WORKER_SOURCE } from './gvsource';
import { GvInput, GvResult } from './gvlayout';

/** Above this many units dot's time grows past interactive: the hand layout draws them. */
export const GV_MAX_UNITS = 1500;

type Reply = { id: number; result?: GvResult & { ms: number }; error?: string };

class GvWorker {
  private worker: Worker | null = null;
  private failed = false;
  private nextId = 0;
  private pending = new Map<number, (r: (GvResult & { ms: number }) | null) => void>();

  private start(): Worker | null {
    if (this.worker || this.failed) {
      return this.worker;
    }
    try {
      const url = URL.createObjectURL(new Blob([GV_WORKER_SOURCE], { type: 'text/javascript' }));
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

  layout(input: GvInput): Promise<(GvResult & { ms: number }) | null> {
    if (typeof Worker === 'undefined' || typeof Blob === 'undefined' || input.ids.length > GV_MAX_UNITS) {
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

let shared: GvWorker | null = null;

/** Lay out with Graphviz in the page's worker; null means "use the hand layout". */
export function graphvizLayout(input: GvInput): Promise<(GvResult & { ms: number }) | null> {
  shared = shared || new GvWorker();
  return shared.layout(input);
}
