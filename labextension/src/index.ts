import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { IStatusBar } from '@jupyterlab/statusbar';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import { GraphStore } from './renderer/store';
import { GraphView } from './renderer/view';
import { Delta } from './renderer/types';
import { ProfileDock, ProfileModel } from './renderer/profile';
import { registerDebuggerCommands } from './debuggercommands';
import { CaptureDock, CaptureModel } from './captureview';
import { ensureGraphvizService } from './renderer/gvservice';

const TARGET = 'tapelab';
/** The side panel never opens narrower than this: the graph's toolbar and the profile's axis fit. */
export const PANEL_MIN_WIDTH = 450;

/** A titled section of the panel whose body collapses when its title is clicked. */
function section(title: string, body: HTMLElement, grow: boolean): HTMLDivElement {
  const s = document.createElement('div');
  s.className = 'tapelab-panel-section' + (grow ? ' tapelab-panel-grow' : '');
  s.dataset.section = title;
  const head = document.createElement('button');
  head.className = 'tapelab-panel-section-head';
  head.textContent = '▾ ' + title;
  head.title = 'collapse or expand this section';
  head.addEventListener('click', () => {
    const collapsed = s.classList.toggle('tapelab-collapsed');
    head.textContent = (collapsed ? '▸ ' : '▾ ') + title;
  });
  s.append(head, body);
  return s;
}

/**
 * The live tape of the active notebook's kernel. The kernel side (tapelab.kernel's bridge)
 * opens a comm to target "tapelab" when it loads; the panel also opens one itself when it
 * meets a kernel (or after a restart), so whichever side comes second finds the other.
 */
class TapePanel extends Widget {
  readonly store = new GraphStore();
  readonly view: GraphView;
  readonly profile = new ProfileDock(); // the last profile of this kernel (%%profile, profile_ready)
  readonly capture = new CaptureDock(); // the last captured graph of this kernel (capture_done)
  private header: HTMLDivElement;
  recording = false;
  connected = false;
  kernelName = '';
  updates = 0;
  private comm: Kernel.IComm | null = null;
  private openTried = false;
  private kernel: Kernel.IKernelConnection | null = null;
  private registered = new WeakSet<Kernel.IKernelConnection>();
  private greeted = new WeakSet<Kernel.IComm>();
  private listeners: (() => void)[] = [];

  constructor() {
    super();
    this.id = 'tapelab-panel';
    this.title.caption = 'tapelab: the live tape of this notebook';
    this.title.label = 'tapelab';
    this.header = document.createElement('div');
    this.header.className = 'tapelab-panel-header';
    this.node.appendChild(this.header);
    this.addClass('tapelab-panel');
    this.node.style.minWidth = `${PANEL_MIN_WIDTH}px`;
    this.view = new GraphView(this.store);
    this.node.appendChild(section('tape', this.view.node, true));
    this.node.appendChild(section('profile', this.profile.node, false));
    this.node.appendChild(section('capture', this.capture.node, false));
    this.store.onChange(() => this.refresh());
    this.refresh();
  }

  /** Shown (the sidebar opened): fit the picture to the size it has now. */
  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    requestAnimationFrame(() => this.view.fit());
  }

  onUpdate(fn: () => void): void {
    this.listeners.push(fn);
  }

  private refresh(): void {
    const d = this.node.dataset;
    d.updates = String(this.updates);
    d.connected = String(this.connected);
    d.recording = String(this.recording);
    d.nodes = String(this.store.nodes.length);
    this.header.textContent = '';
    const status = document.createElement('span');
    if (!this.kernel) {
      status.textContent = 'no notebook kernel';
    } else if (!this.connected) {
      status.textContent = `${this.kernelName}: tapelab not loaded (run %load_ext tapelab.kernel)`;
    } else {
      const rec = document.createElement('span');
      rec.className = this.recording ? 'tapelab-rec' : '';
      rec.textContent = this.recording ? '● recording' : '○ not recording';
      status.appendChild(rec);
      const conn = document.createElement('span');
      conn.className = 'tapelab-conn';
      conn.textContent = ` · connected (${this.updates} messages)`;
      status.appendChild(conn);
      status.appendChild(document.createTextNode(` · ${this.store.nodes.length} nodes · ${this.kernelName}`));
    }
    this.header.appendChild(status);
    for (const fn of this.listeners) {
      fn();
    }
  }

  /** Follow a notebook's kernel (or none). */
  follow(nb: NotebookPanel | null): void {
    const kernel = nb?.sessionContext.session?.kernel ?? null;
    if (kernel === this.kernel) {
      return;
    }
    this.detach();
    this.kernel = kernel;
    this.kernelName = nb?.sessionContext.kernelDisplayName ?? '';
    if (kernel) {
      this.attach(kernel);
    }
    this.refresh();
  }

  private attach(kernel: Kernel.IKernelConnection): void {
    if (!this.registered.has(kernel)) {
      this.registered.add(kernel);
      kernel.registerCommTarget(TARGET, (comm: Kernel.IComm) => {
        if (kernel === this.kernel) {
          this.adopt(comm);
          this.greeted.add(comm);
          comm.send({ type: 'hello' }); // tell the kernel someone listens
        }
      });
      kernel.statusChanged.connect((_, status) => {
        if (kernel !== this.kernel) {
          return;
        }
        if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
          this.comm = null;
          this.connected = false;
          this.recording = false;
          this.openTried = false;
          this.refresh();
        } else if (status === 'idle' && !this.comm && !this.openTried) {
          this.open(kernel);
        }
      });
    }
    this.open(kernel);
  }

  private open(kernel: Kernel.IKernelConnection): void {
    if (kernel.status === 'dead' || kernel.isDisposed) {
      return;
    }
    this.openTried = true; // once per kernel process: a kernel without tapelab answers with a close
    try {
      const comm = kernel.createComm(TARGET);
      this.adopt(comm);
      this.greeted.add(comm); // the open message is the greeting
      comm.open({ type: 'hello' });
    } catch (err) {
      console.warn('tapelab: could not open a comm', err);
    }
  }

  private adopt(comm: Kernel.IComm): void {
    this.comm = comm;
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
      if (!this.greeted.has(comm)) {
        // answer once on every comm we receive on, so the kernel knows the panel listens
        this.greeted.add(comm);
        comm.send({ type: 'hello' });
      }
      this.handle(msg.content.data as any);
    };
    comm.onClose = () => {
      if (this.comm === comm) {
        this.comm = null;
        this.connected = false;
        this.refresh();
      }
    };
  }

  private detach(): void {
    this.comm = null;
    this.connected = false;
    this.kernel = null;
    this.openTried = false;
  }

  private handle(msg: { type: string; recording?: boolean } & Delta): void {
    this.connected = true;
    this.updates++;
    switch (msg.type) {
      case 'hello':
      case 'state':
        this.recording = !!msg.recording;
        break;
      case 'begin':
        this.store.clear();
        this.view.setRunning(true);
        break;
      case 'delta':
        this.store.apply(msg);
        break;
      case 'end':
        this.view.setRunning(false);
        break;
      case 'clear':
        this.store.clear();
        break;
      case 'profile':
        this.profile.show((msg as any).profile as ProfileModel);
        break;
      case 'capture':
        this.capture.show((msg as any).capture as CaptureModel, !!(msg as any).update);
        break;
    }
    this.refresh();
  }

  send(data: Record<string, unknown>): void {
    if (this.comm) {
      this.comm.send(data as any);
    }
  }

  toggleRecording(): void {
    this.send({ type: 'set', recording: !this.recording });
  }

  clear(): void {
    this.store.clear();
    this.send({ type: 'clear' });
    this.refresh();
  }
}

class StatusItem extends Widget {
  constructor(private panel: TapePanel) {
    super();
    this.addClass('tapelab-status');
    this.node.style.padding = '0 6px';
    this.node.title = 'tapelab: click to toggle recording';
    this.node.addEventListener('click', () => panel.toggleRecording());
    panel.onUpdate(() => this.update());
    this.update();
  }

  update(): void {
    const p = this.panel;
    this.node.textContent = !p.connected ? 'tape: –' : `tape: ${p.recording ? '● on' : '○ off'} · ${p.store.nodes.length} nodes`;
    this.node.dataset.recording = String(p.recording);
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'tapelab:plugin',
  description: 'The live tape side panel, status item and commands of tapelab.',
  autoStart: true,
  requires: [ILabShell, INotebookTracker],
  optional: [IStatusBar, ICommandPalette],
  activate: (app: JupyterFrontEnd, shell: ILabShell, tracker: INotebookTracker,
    statusBar: IStatusBar | null, palette: ICommandPalette | null) => {
    const panel = new TapePanel();
    shell.add(panel, 'right', { rank: 900 });
    const followCurrent = () => panel.follow(tracker.currentWidget);
    tracker.currentChanged.connect(followCurrent);
    tracker.widgetAdded.connect((_, nb) => {
      nb.sessionContext.kernelChanged.connect(() => {
        if (tracker.currentWidget === nb) {
          panel.follow(nb);
        }
      });
      nb.sessionContext.ready.then(() => {
        if (tracker.currentWidget === nb) {
          panel.follow(nb);
        }
      });
    });
    followCurrent();
    app.commands.addCommand('tapelab:toggle-recording', {
      label: 'tapelab: Toggle Tape Recording',
      execute: () => panel.toggleRecording()
    });
    app.commands.addCommand('tapelab:clear', {
      label: 'tapelab: Clear Tape',
      execute: () => panel.clear()
    });
    app.commands.addCommand('tapelab:show-panel', {
      label: 'tapelab: Show Tape Panel',
      execute: () => shell.activateById(panel.id)
    });
    if (palette) {
      for (const command of ['tapelab:toggle-recording', 'tapelab:clear', 'tapelab:show-panel']) {
        palette.addItem({ command, category: 'tapelab' });
      }
    }
    registerDebuggerCommands(app, palette);
    if (statusBar) {
      statusBar.registerStatusItem('tapelab:status', { item: new StatusItem(panel), align: 'left', rank: 50 });
    }
    (window as any).tapelabPanel = panel; // for end-to-end tests and the curious
    (window as any).tapelabRenderer = { GraphStore, GraphView }; // to draw synthetic graphs in scale tests
  }
};

/**
 * Graphviz layouts for every tapelab view on the page, the anywidget views included (their bundle
 * does not carry the WebAssembly). No requirements, so it also starts where the panel cannot.
 */
const graphvizPlugin: JupyterFrontEndPlugin<void> = {
  id: 'tapelab:graphviz',
  description: 'Graphviz (WebAssembly, in a web worker) layouts for tapelab views, the widgets included.',
  autoStart: true,
  activate: () => ensureGraphvizService()
};

export default [plugin, graphvizPlugin];
