/**
 * The anywidget side of tapelab.widgets.ProfileView (`_view` "profile") and Monitor (`_view`
 * "monitor"), used by widget/index.ts. A Monitor's points arrive as custom messages between the
 * full-history `data` syncs; each view keeps its own MonitorStore.
 */
import { MonitorData, MonitorPoint, MonitorStore, MonitorView } from './renderer/monitor';
import { ProfileModel, ProfileRenderer } from './renderer/profile';

interface Model {
  get(name: string): any;
  on(event: string, cb: (...args: any[]) => void): void;
  off(event?: string, cb?: (...args: any[]) => void): void;
  send(content: any): void;
}

/** Returns true when it handled the model (a profile or monitor widget: their views subscribe
 *  themselves; a Monitor's full history comes with `data`, so a late view misses nothing). */
export function initializeProfileWidget(model: Model): boolean {
  const kind = model.get('_view');
  return kind === 'monitor' || kind === 'profile';
}

/** Renders a profile or monitor widget; undefined for other views. */
export function renderProfileWidget({ model, el }: { model: Model; el: HTMLElement }): (() => void) | undefined {
  const kind = model.get('_view');
  if (kind === 'monitor') {
    const store = new MonitorStore();
    store.set(model.get('data') as MonitorData);
    const view = new MonitorView(store, model.get('title') || '');
    el.appendChild(view.node);
    const retitle = () => view.setTitle(model.get('title') || '');
    const reset = () => store.set(model.get('data') as MonitorData);
    const points = (msg: { type: string; points?: MonitorPoint[] }) => {
      if (msg.type === 'points' && msg.points) {
        store.append(msg.points);
      }
    };
    model.on('change:title', retitle);
    model.on('change:data', reset);
    model.on('msg:custom', points);
    return () => {
      model.off('change:title', retitle);
      model.off('change:data', reset);
      model.off('msg:custom', points);
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
