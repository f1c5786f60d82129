/**
 * The anywidget ESM of tapelab.widgets (TapeView, TensorView): the same renderer as the
 * labextension, bundled by esbuild into widgets/static/tapelab.js (no CDN).
 *
 * Deltas arrive as custom messages; they are applied to one GraphStore per model in
 * `initialize`, so messages sent before a view exists are not lost.
 */
import { GraphStore } from '../src/renderer/store';
import { GraphView } from '../src/renderer/view';
import { renderTensor, TensorData } from '../src/renderer/tensor';
import { Delta, Graph } from '../src/renderer/types';
import { initializeProfileWidget, renderProfileWidget } from '../src/profilewidget';
import { selectInTape } from '../src/renderer/profile';
import { renderFxWidget } from '../src/fxview';
import { renderDebuggerWidget } from '../src/debugger';
import { renderCaptureWidget } from '../src/captureview';

interface Model {
  get(name: string): any;
  on(event: string, cb: (...args: any[]) => void): void;
  off(event?: string, cb?: (...args: any[]) => void): void;
  send(content: any): void;
}

const stores = new WeakMap<Model, { store: GraphStore; running: boolean; views: Set<GraphView> }>();

function state(model: Model) {
  let s = stores.get(model);
  if (!s) {
    const store = new GraphStore();
    const g = model.get('graph') as Graph | undefined;
    if (g && g.nodes) {
      store.setGraph(g);
    }
    s = { store, running: !!model.get('running'), views: new Set() };
    stores.set(model, s);
  }
  return s;
}

function initialize({ model }: { model: Model }) {
  if (initializeProfileWidget(model)) {
    return;
  }
  if (model.get('_view') !== 'tape') {
    return;
  }
  const s = state(model);
  model.on('msg:custom', (msg: { type: string } & Delta) => {
    if (msg.type === 'delta') {
      s.store.apply(msg);
    } else if (msg.type === 'reset') {
      s.store.clear();
    } else if (msg.type === 'select') {
      // a ProfileView linked to this tape: show the clicked op
      s.views.forEach(v => selectInTape(v, s.store, (msg as any).seq, (msg as any).phase));
    } else if (msg.type === 'running') {
      s.running = !!(msg as any).running;
      s.views.forEach(v => v.setRunning(s.running));
    }
  });
  model.on('change:graph', () => {
    const g = model.get('graph') as Graph;
    if (g && g.nodes && g.nodes.length >= s.store.nodes.length) {
      s.store.setGraph(g);
    }
  });
}

function render({ model, el }: { model: Model; el: HTMLElement }) {
  const profiled = renderProfileWidget({ model, el });
  if (profiled) {
    return profiled;
  }
  if (model.get('_view') === 'fx') {
    return renderFxWidget({ model, el });
  }
  if (model.get('_view') === 'capture') {
    return renderCaptureWidget({ model, el });
  }
  if (model.get('_view') === 'debugger') {
    return renderDebuggerWidget({ model, el });
  }
  if (model.get('_view') === 'tensor') {
    const draw = () => {
      el.textContent = '';
      el.appendChild(renderTensor(model.get('data') as TensorData));
    };
    draw();
    model.on('change:data', draw);
    return () => model.off('change:data', draw);
  }
  const s = state(model);
  const view = new GraphView(s.store, { fixedHeight: true });
  view.setRunning(s.running);
  s.views.add(view);
  el.appendChild(view.node);
  return () => {
    s.views.delete(view);
    view.dispose();
  };
}

export default { initialize, render };
