// The Graphviz service shared on the page (gvclient): views in a bundle without Graphviz (the
// anywidget's) reach the worker of the bundle that serves it, else keep the hand layout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { graphvizLayout, GV_MAX_UNITS, serveGraphviz } from '../src/renderer/gvclient';
import { GvInput } from '../src/renderer/gvlayout';

/** A stand-in for the browser's Worker: counts starts, answers every request with its id. */
class FakeWorker {
  static started: string[] = [];
  onmessage: ((e: { data: unknown }) => void) | null = null;
  onerror: unknown = null;
  constructor(url: string) {
    FakeWorker.started.push(url);
  }
  postMessage(m: { id: number; input: GvInput }): void {
    setTimeout(() => this.onmessage?.({ data: { id: m.id, result: { x: [7], y: [8], width: 1, height: 1, ms: 0, n: m.input.ids.length } } }));
  }
  terminate(): void {}
}

test('views reach the page\'s Graphviz service through the document, else the hand layout', async () => {
  const g = globalThis as unknown as Record<string, unknown>;
  g.Worker = FakeWorker;
  const createObjectURL = URL.createObjectURL;
  URL.createObjectURL = () => 'blob:gv';
  try {
    const doc = new EventTarget() as unknown as Document;
    const input = { ids: ['a'] } as unknown as GvInput;
    assert.equal(await graphvizLayout(input, doc), null); // nobody serves: the hand layout

    const stopA = serveGraphviz('worker source A', doc);
    const stopB = serveGraphviz('worker source B', doc); // a second bundle serving: not started
    const r = await graphvizLayout(input, doc);
    assert.deepEqual(r && r.x, [7]);
    await graphvizLayout(input, doc);
    assert.equal(FakeWorker.started.length, 1); // one worker for the page, started on first use

    const big = { ids: Array.from({ length: GV_MAX_UNITS + 1 }, (_, i) => String(i)) } as unknown as GvInput;
    assert.equal(await graphvizLayout(big, doc), null); // too large for dot: the hand layout
    stopA();
    stopB();
    assert.equal(await graphvizLayout(input, doc), null);
  } finally {
    delete g.Worker;
    URL.createObjectURL = createObjectURL;
  }
});
