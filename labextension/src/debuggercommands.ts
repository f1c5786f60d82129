/**
 * Palette commands and keyboard shortcuts for the backward debugger widgets
 * (tapelab.widgets.Debugger). They act on the focused debugger (keyboard focus inside the
 * widget), else on the one used or rendered most recently; debuggers register themselves on
 * `window.tapelabDebuggers` (src/debugger.ts, bundled into the widgets' ESM).
 *
 * Shortcuts (only while focus is inside a debugger, so the notebook's keys are untouched):
 * F10 step, Shift+F10 step over module, F8 continue, Shift+F8 run to NaN.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';

interface Handle {
  node: HTMLElement;
  lastActive: number;
  command(cmd: string): void;
}

export const DEBUGGER_COMMANDS: { id: string; cmd: string; label: string; keys: string[] }[] = [
  { id: 'tapelab:debugger-step', cmd: 'step', label: 'tapelab: Debugger Step', keys: ['F10'] },
  { id: 'tapelab:debugger-step-over', cmd: 'step_over', label: 'tapelab: Debugger Step Over Module', keys: ['Shift F10'] },
  { id: 'tapelab:debugger-continue', cmd: 'continue', label: 'tapelab: Debugger Continue', keys: ['F8'] },
  { id: 'tapelab:debugger-run-to-nan', cmd: 'run_to_nan', label: 'tapelab: Debugger Run to NaN', keys: ['Shift F8'] }
];

/** The debugger the commands act on: the focused one, else the most recently used or rendered. */
export function activeDebugger(): Handle | null {
  const all = ((window as any).tapelabDebuggers || []) as Handle[];
  const live = all.filter(d => d.node.isConnected);
  if (!live.length) {
    return null;
  }
  const focused = live.find(d => d.node.contains(document.activeElement));
  return focused ?? live.reduce((a, b) => (b.lastActive >= a.lastActive ? b : a));
}

export function registerDebuggerCommands(app: JupyterFrontEnd, palette: ICommandPalette | null): void {
  for (const c of DEBUGGER_COMMANDS) {
    app.commands.addCommand(c.id, {
      label: c.label,
      caption: `${c.label.replace('tapelab: Debugger ', '')} in the focused (else the last used) tapelab debugger`,
      isEnabled: () => activeDebugger() !== null,
      execute: () => activeDebugger()?.command(c.cmd)
    });
    app.commands.addKeyBinding({ command: c.id, keys: c.keys, selector: '.tapelab-debugger' });
    if (palette) {
      palette.addItem({ command: c.id, category: 'tapelab' });
    }
  }
}
