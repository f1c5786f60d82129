/**
 * The anywidget side of tapelab.widgets.ProfileView (`_view` "profile") and Monitor (`_view`
 * "monitor"), used by widget/index.ts. A Monitor's points arrive as custom messages; they go to
 * one MonitorStore per model (made in `initialize`), so none is lost before a view exists.
 */
import { MonitorData, MonitorPoint, MonitorStore, MonitorView } from './renderer/monitor';
import { ProfileModel, ProfileRenderer } from './renderer/profile';

interface Model {
  get(name: string): any;
  on(event: string, cb: (...args: any[]) => void): void;
  off(event?: string, cb?: (...args: any[]) => void): void;
  send(content: any): void;
}

const monitors = new WeakMap<Model, MonitorStore>();

function monitorStore(model: Model): MonitorStore {
  let s = monitors.get(model);
  if (!s) {
    s = new MonitorStore();
    s.set(model.get('data') as MonitorData);
    monitors.set(model, s);
  }
  return s;
}

/** Returns true when it handled the model (a profile or monitor widget). */
export function initializeProfileWidget(model: Model): boolean {
  const kind = model.get('_view');
  if (kind !== 'monitor') {
    return kind === 'profile';
  }
  const s = monitorStore(model);
  model.on('msg:custom', (msg: { type: string; points?: MonitorPoint[] }) => {
    if (msg.type === 'points' && msg.points) {
      s.append(msg.points);
    }
  });
  model.on('change:data', () => s.set(model.get('data') as MonitorData));
  return true;
}

/** Renders a profile or monitor widget; undefined for other views. */
export function renderProfileWidget({ model, el }: { model: Model; el: HTMLElement }): (() => void) | undefined {
  const kind = model.get('_view');
  if (kind === 'monitor') {
    const view = new MonitorView(monitorStore(model), model.get('title') || '');
    el.appendChild(view.node);
    const retitle = () => view.setTitle(model.get('title') || '');
    model.on('change:title', retitle);
    return () => {
      model.off('change:title', retitle);
      view.dispose();
    };
  }
  if (kind !== 'profile') {
    return undefined;
  }
  const p = model.get('profile') as ProfileModel;
  if (!p || !p.events) {
    el.textContent = 'profiling…';
  }
  let view: ProfileRenderer | null = null;
  const draw = () => {
    const m = model.get('profile') as ProfileModel;
    if (!m || !m.events) {
      return;
    }
    if (view) {
      view.setModel(m);
    } else {
      el.textContent = '';
      view = new ProfileRenderer(m, { onSelect: sel => model.send(sel) });
      el.appendChild(view.node);
    }
  };
  draw();
  model.on('change:profile', draw);
  return () => {
    model.off('change:profile', draw);
    view?.dispose();
  };
}
