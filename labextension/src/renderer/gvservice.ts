/**
 * The labextension's Graphviz service: the only module that imports the worker's bundled source
 * (Graphviz's WebAssembly, about 0.9 MB), so the anywidget bundle, saved in every notebook's
 * widget state, stays small and reaches this service through gvclient's document event.
 */
import { GV_WORKER_SOURCE } from './gvsource';
import { serveGraphviz } from './gvclient';

let serving = false;

/** Serve Graphviz layouts on this page (once, however many callers). */
export function ensureGraphvizService(): void {
  if (!serving && typeof document !== 'undefined') {
    serveGraphviz(GV_WORKER_SOURCE);
    serving = true;
  }
}
