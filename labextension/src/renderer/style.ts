/** One stylesheet for every surface (labextension panel, mime output, anywidget), injected once. */
export const CSS = `
.tapelab-graph { position: relative; display: flex; flex-direction: column; font: 12px var(--jp-ui-font-family, system-ui, sans-serif); color: var(--jp-ui-font-color1, #1f2937); height: 100%; min-height: 0; }
.tapelab-graph.tapelab-fixed { height: 440px; border: 1px solid var(--jp-border-color2, #e5e7eb); border-radius: 4px; }
.tapelab-toolbar { display: flex; gap: 6px; align-items: center; padding: 4px 6px; border-bottom: 1px solid var(--jp-border-color2, #e5e7eb); flex-wrap: wrap; }
.tapelab-toolbar input { flex: 1 1 120px; min-width: 80px; font: inherit; padding: 2px 4px; }
.tapelab-toolbar button { font: inherit; padding: 1px 6px; cursor: pointer; }
.tapelab-info { color: var(--jp-ui-font-color2, #6b7280); white-space: nowrap; }
.tapelab-canvas { position: relative; flex: 1 1 auto; overflow: hidden; min-height: 120px; cursor: grab; background: var(--jp-layout-color0, #fff); }
.tapelab-canvas svg { position: relative; display: block; width: 100%; height: 100%; user-select: none; }
.tapelab-bulk { position: absolute; left: 0; top: 0; width: 100%; height: 100%; display: none; }
.tapelab-unit rect.tapelab-box { stroke: #64748b; stroke-width: 1; }
.tapelab-unit { cursor: pointer; }
.tapelab-unit.tapelab-forward rect.tapelab-box { fill: #dbeafe; stroke: #2563eb; }
.tapelab-unit.tapelab-backward rect.tapelab-box { fill: #ffedd5; stroke: #ea580c; stroke-dasharray: 4 2; }
.tapelab-unit.tapelab-leaf rect.tapelab-box { fill: #f3f4f6; stroke: #9ca3af; }
.tapelab-unit.tapelab-group rect.tapelab-box { fill: #ede9fe; stroke: #7c3aed; stroke-width: 1.5; }
.tapelab-unit.tapelab-match rect.tapelab-box { stroke: #dc2626; stroke-width: 3; }
.tapelab-unit.tapelab-pinned rect.tapelab-box { stroke: #111827; stroke-width: 2.5; }
.tapelab-unit.tapelab-new rect.tapelab-box { animation: tapelab-flash 0.8s ease-out; }
@keyframes tapelab-flash { from { fill: #fde047; } }
.tapelab-unit text { font-size: 11px; fill: #111827; pointer-events: none; }
.tapelab-unit text.tapelab-sub { font-size: 9.5px; fill: #4b5563; }
.tapelab-progress { fill: #ea580c; }
.tapelab-edge { fill: none; stroke: #94a3b8; stroke-width: 1.2; }
.tapelab-edge.tapelab-grad { stroke: #f97316; stroke-dasharray: 4 3; }
.tapelab-frame rect { fill: rgba(124, 58, 237, 0.04); stroke: #c4b5fd; stroke-dasharray: 3 3; }
.tapelab-frame text { font-size: 10px; fill: #6d28d9; cursor: pointer; }
.tapelab-canvas:focus { outline: none; }
.tapelab-canvas:focus-visible, .tapelab-canvas:focus { box-shadow: inset 0 0 0 1px #93c5fd; }
.tapelab-resize { flex: none; height: 8px; cursor: ns-resize; background: var(--jp-layout-color2, #f3f4f6); border-top: 1px solid var(--jp-border-color2, #e5e7eb); }
.tapelab-resize:hover { background: #c7d2fe; }
.tapelab-lod rect.tapelab-box, .tapelab-lod .tapelab-frame rect, .tapelab-lod .tapelab-edge { vector-effect: non-scaling-stroke; }
text.tapelab-glabel { font-weight: 600; fill: #4c1d95; paint-order: stroke; stroke: var(--jp-layout-color0, #fff); stroke-width: 3px; stroke-linejoin: round; vector-effect: non-scaling-stroke; }
.tapelab-unit.tapelab-current rect.tapelab-box { stroke: #dc2626; stroke-width: 4; }
.tapelab-frame.tapelab-current rect { stroke: #dc2626; stroke-width: 3; stroke-dasharray: none; }
.tapelab-card { position: absolute; z-index: 10; pointer-events: none; max-width: 360px; background: var(--jp-layout-color1, #fff); border: 1px solid #94a3b8; border-radius: 4px; padding: 6px 8px; box-shadow: 0 2px 8px rgba(0,0,0,.15); font-size: 11.5px; display: none; }
.tapelab-card.tapelab-pinned-card { pointer-events: auto; border-color: #111827; }
.tapelab-card b { display: block; margin-bottom: 2px; }
.tapelab-card .tapelab-card-sep { margin-top: 3px; padding-top: 2px; border-top: 1px solid var(--jp-border-color2, #e5e7eb); color: #6b7280; font-size: 10.5px; }
.tapelab-unit.tapelab-selected rect.tapelab-box { stroke: #0891b2; stroke-width: 4; }
.tapelab-minimap { position: absolute; right: 6px; bottom: 6px; width: 168px; height: 112px; z-index: 5; background: rgba(255,255,255,.92); border: 1px solid #94a3b8; border-radius: 3px; cursor: crosshair; display: none; }
.tapelab-card .tapelab-row { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.tapelab-card .tapelab-k { color: #6b7280; margin-right: 4px; }
.tapelab-tensor { font: 12px var(--jp-ui-font-family, system-ui, sans-serif); display: inline-flex; gap: 12px; align-items: flex-start; padding: 4px; }
.tapelab-tensor table { border-collapse: collapse; }
.tapelab-tensor td { padding: 0 6px 0 0; }
.tapelab-panel-section { display: flex; flex-direction: column; min-height: 0; flex: 0 1 auto; max-height: 45%; overflow: auto; }
.tapelab-panel-section.tapelab-panel-grow { flex: 1 1 auto; min-height: 240px; max-height: none; overflow: hidden; }
.tapelab-panel-section.tapelab-collapsed { flex: 0 0 auto; min-height: 0; }
.tapelab-panel-section.tapelab-collapsed > :not(.tapelab-panel-section-head) { display: none !important; }
.tapelab-panel-section-head { text-align: left; font: 600 11.5px var(--jp-ui-font-family, system-ui, sans-serif); padding: 2px 6px; border: none; border-top: 1px solid var(--jp-border-color2, #e5e7eb); background: var(--jp-layout-color2, #f3f4f6); color: var(--jp-ui-font-color1, #1f2937); cursor: pointer; }
.tapelab-panel-section:has(> .tapelab-panel-profile[style*="none"]), .tapelab-panel-section:has(> .tapelab-panel-capture[style*="none"]) { display: none; }
.tapelab-panel-header { padding: 4px 8px; border-bottom: 1px solid var(--jp-border-color2, #e5e7eb); font-size: 12px; }
.tapelab-panel-header .tapelab-rec { color: #dc2626; font-weight: bold; }
`;

export function injectStyle(doc: Document = document): void {
  if (doc.getElementById('tapelab-style')) {
    return;
  }
  const s = doc.createElement('style');
  s.id = 'tapelab-style';
  s.textContent = CSS;
  doc.head.appendChild(s);
}
