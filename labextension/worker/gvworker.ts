/**
 * The Graphviz web worker: loads @hpcc-js/wasm-graphviz (WebAssembly inlined in the bundle, no
 * CDN) once and answers {id, input} with {id, result} or {id, error}. Bundled by
 * scripts/build-worker.mjs into a string the renderer starts the worker from.
 */
import { Graphviz } from '@hpcc-js/wasm-graphviz';
import { dotLayout, GvInput } from '../src/renderer/gvlayout';

let gv: Promise<Graphviz> | null = null;
const scope = self as unknown as { onmessage: (e: MessageEvent) => void; postMessage: (m: unknown) => void };

scope.onmessage = async (e: MessageEvent) => {
  const { id, input } = e.data as { id: number; input: GvInput };
  try {
    gv = gv || Graphviz.load();
    const t0 = performance.now();
    const result = dotLayout(await gv, input);
    scope.postMessage({ id, result: { ...result, ms: performance.now() - t0 } });
  } catch (err) {
    scope.postMessage({ id, error: String(err) });
  }
};
