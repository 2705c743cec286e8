// optiboard: paints an overlay (backend/graphview/overlay.py) on the graph Netron has drawn.
// Loaded by the one patched line in browser.js (backend/viewer.py); fetches the overlay's JSON
// from our own origin and sets fills, tooltips and a legend. Every text from the model goes in
// through textContent, never as markup.

const SVG = 'http://www.w3.org/2000/svg';

const firstOutput = (node) => {
    for (const argument of node.outputs || []) {
        for (const value of argument.value || []) {
            if (value && value.name) {
                return value.name;
            }
        }
    }
    return null;
};

const tooltip = (document, parent, text) => {
    let title = Array.from(parent.children).find((child) => child.tagName === 'title');
    if (!title) {
        title = document.createElementNS(SVG, 'title');
        parent.insertBefore(title, parent.firstChild);
    }
    title.textContent = text;
};

const legend = (document, overlay) => {
    const box = document.createElement('div');
    box.id = 'optiboard-legend';
    box.style.cssText = 'position:fixed;top:8px;right:8px;z-index:1000;background:#fff;' +
        'border:1px solid #999;border-radius:4px;padding:6px 8px;font:12px sans-serif;color:#000;' +
        'max-width:340px;opacity:0.95';
    const heading = document.createElement('div');
    heading.style.fontWeight = 'bold';
    heading.textContent = String(overlay.title || '');
    box.appendChild(heading);
    for (const [fill, label] of overlay.legend || []) {
        const row = document.createElement('div');
        row.className = 'optiboard-legend-row';
        const swatch = document.createElement('span');
        swatch.style.cssText = 'display:inline-block;width:12px;height:12px;margin-right:6px;' +
            'vertical-align:middle;border:1px solid #666';
        swatch.style.background = String(fill);
        const text = document.createElement('span');
        text.textContent = String(label);
        row.appendChild(swatch);
        row.appendChild(text);
        box.appendChild(row);
    }
    const old = document.getElementById('optiboard-legend');
    if (old) {
        old.remove();
    }
    document.body.appendChild(box);
};

export const paint = async (graph, url, document) => {
    const started = performance.now();
    const target = new URL(url, document.location.href);
    if (target.origin !== document.location.origin) {
        throw new Error('overlay must come from this origin');
    }
    const response = await fetch(target.href, { credentials: 'same-origin' });
    const overlay = await response.json();
    const marks = new Map((overlay.nodes || []).map((mark) => [String(mark[0]), mark]));
    let painted = 0;
    for (const entry of graph._table.values()) {
        if (!entry || !entry.id || !String(entry.id).startsWith('node-') || !entry.value || !entry.element) {
            continue;
        }
        const output = firstOutput(entry.value);
        const mark = (entry.value.name && marks.get(entry.value.name)) || (output && marks.get(output));
        if (!mark) {
            continue;
        }
        const [, fill, ink, text] = mark;
        for (const item of entry.element.querySelectorAll('.node-item')) {
            const path = item.querySelector('path');
            if (path) {
                path.style.fill = String(fill);
            }
            const label = item.querySelector('text');
            if (label) {
                label.style.fill = String(ink);
            }
            tooltip(document, item, String(text));
        }
        tooltip(document, entry.element, String(text));
        entry.element.setAttribute('data-optiboard-fill', String(fill));
        entry.element.setAttribute('data-optiboard-title', String(text));
        painted++;
    }
    legend(document, overlay);
    const body = document.body;
    body.setAttribute('data-optiboard-painted', String(painted));
    body.setAttribute('data-optiboard-overlay-ms', (performance.now() - started).toFixed(1));
    body.setAttribute('data-optiboard-overlay', String(overlay.kind || ''));
};
