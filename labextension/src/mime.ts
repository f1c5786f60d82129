import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';
import { GraphStore } from './renderer/store';
import { GraphView } from './renderer/view';
import { Graph, GRAPH_MIME } from './renderer/types';
import { PROFILE_MIME, ProfileModel, ProfileRenderer } from './renderer/profile';
import { CAPTURE_MIME, CaptureModel, CaptureRenderer } from './captureview';
import { ensureGraphvizService } from './renderer/gvservice';

/** Renders application/vnd.tapelab.graph+json: saved notebooks show their graphs without a kernel. */
export class GraphOutput extends Widget implements IRenderMime.IRenderer {
  private view: GraphView | null = null;

  constructor() {
    super();
    this.addClass('tapelab-mime');
    ensureGraphvizService(); // the mime renderers may load without the plugin (its shell absent)
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const g = model.data[GRAPH_MIME] as unknown as Graph;
    const store = new GraphStore();
    store.setGraph(g);
    if (this.view) {
      this.view.dispose();
    }
    this.view = new GraphView(store, { fixedHeight: true });
    this.node.appendChild(this.view.node);
  }

  dispose(): void {
    this.view?.dispose();
    super.dispose();
  }
}

/** Renders application/vnd.tapelab.profile+json (a ProfileView saved in a notebook). */
export class ProfileOutput extends Widget implements IRenderMime.IRenderer {
  private view: ProfileRenderer | null = null;

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.view?.dispose();
    this.node.textContent = '';
    this.view = new ProfileRenderer(model.data[PROFILE_MIME] as unknown as ProfileModel);
    this.node.appendChild(this.view.node);
  }

  dispose(): void {
    this.view?.dispose();
    super.dispose();
  }
}

/** Renders application/vnd.tapelab.capture+json (a CaptureView saved in a notebook). */
export class CaptureOutput extends Widget implements IRenderMime.IRenderer {
  private view: CaptureRenderer | null = null;

  constructor() {
    super();
    ensureGraphvizService();
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.view?.dispose();
    this.node.textContent = '';
    this.view = new CaptureRenderer(model.data[CAPTURE_MIME] as unknown as CaptureModel);
    this.node.appendChild(this.view.node);
  }

  dispose(): void {
    this.view?.dispose();
    super.dispose();
  }
}

const captureExtension: IRenderMime.IExtension = {
  id: 'tapelab:capture-renderer',
  rendererFactory: { safe: true, mimeTypes: [CAPTURE_MIME], createRenderer: () => new CaptureOutput() },
  rank: 10,
  dataType: 'json'
};

const profileExtension: IRenderMime.IExtension = {
  id: 'tapelab:profile-renderer',
  rendererFactory: { safe: true, mimeTypes: [PROFILE_MIME], createRenderer: () => new ProfileOutput() },
  rank: 10,
  dataType: 'json'
};

const extension: IRenderMime.IExtension = {
  id: 'tapelab:graph-renderer',
  rendererFactory: { safe: true, mimeTypes: [GRAPH_MIME], createRenderer: () => new GraphOutput() },
  rank: 10, // before HTML (50), after live widgets (0)
  dataType: 'json'
};

export default [extension, profileExtension, captureExtension];
