// posenc explorers: the toolkit every explorer is written on.
//
// Python (posenc.book.explorers) writes one block per explorer: a root element
// <div class="pe-explorer" data-explorer="NAME">, its data as JSON in
// <script type="application/json" class="pe-data">, and this file followed by the explorer's
// own few dozen lines, inside one function. Nothing is fetched and no global is set: the
// block works from file://, in Jupyter, and in an output frame (Colab) on its own.
//
// The data names the sliders: {key: {label, values: [...], index, digits, unit, labels}}.
// A slider is a native <input type=range> over the indices of `values` (keyboard, touch
// and screen readers come with it); the number it stands for is values[index]. Every
// number the explorer shows carries its full-precision value in a data-value attribute,
// next to the rounded text a reader sees, so that a test can read it.

const SVG = "http://www.w3.org/2000/svg";

function html(tag, attrs, parent) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

function svg(tag, attrs, parent) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

// A number as a reader sees it: `digits` decimals, "-0.00" shown as "0.00", a unicode minus.
function fmt(value, digits, unit) {
  if (!Number.isFinite(value)) return value > 0 ? "∞" : value < 0 ? "−∞" : "–";
  let x = unit === "pi" ? value / Math.PI : value;
  let text;
  if (digits === "g") { // three significant digits, thousands grouped, powers of ten for the rest
    const a = Math.abs(x);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) text = x.toExponential(2).replace(/\.?0+e/, "e").replace("e+", "e");
    else if (a >= 1000) text = Math.round(x).toLocaleString("en-US");
    else text = x.toPrecision(3).replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "");
  } else if (digits === "int") {
    text = Math.round(x).toLocaleString("en-US");
  } else {
    text = x.toFixed(digits === undefined ? 3 : digits);
    if (Number(text) === 0) text = text.replace("-", "");
  }
  text = text.replace("-", "−");
  return unit === "pi" ? text + "π" : unit === "deg" ? text + "°" : text;
}

// Python's round(): halves to the even neighbour.
function roundHalfEven(x) {
  const r = Math.round(x);
  return Math.abs(x - Math.trunc(x)) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

class Plot {
  // A plot whose drawing units are CSS pixels of its current width: text keeps its size at
  // every width, and the picture is drawn again when the width changes.
  constructor(parent, height) {
    this.holder = html("div", { class: "pe-plot" }, parent);
    this.node = svg("svg", { role: "img" }, this.holder);
    this.height = height; // a number, or a function of the width
  }
  begin(label) {
    const w = Math.max(200, Math.round(this.holder.clientWidth || 400));
    const h = typeof this.height === "function" ? this.height(w) : this.height;
    this.width = w;
    this.node.setAttribute("viewBox", `0 0 ${w} ${h}`);
    this.node.setAttribute("aria-label", label);
    this.node.replaceChildren();
    this.w = w;
    this.h = h;
    return this;
  }
  // The data rectangle [x0, x1] x [y0, y1] mapped into the plot less its margins.
  frame(x0, x1, y0, y1, margin) {
    const m = Object.assign({ left: 40, right: 10, top: 8, bottom: 26 }, margin || {});
    this.box = { left: m.left, right: this.w - m.right, top: m.top, bottom: this.h - m.bottom };
    this.sx = (x) => this.box.left + ((x - x0) / (x1 - x0)) * (this.box.right - this.box.left);
    this.sy = (y) => this.box.bottom - ((y - y0) / (y1 - y0)) * (this.box.bottom - this.box.top);
    return this;
  }
  line(points, cls) {
    const d = points.map(([x, y], i) => `${i ? "L" : "M"}${this.sx(x).toFixed(1)} ${this.sy(y).toFixed(1)}`);
    return svg("path", { d: d.join(""), class: "pe-line " + (cls || "") }, this.node);
  }
  segment(x0, y0, x1, y1, cls) {
    return svg("line", { x1: this.sx(x0), y1: this.sy(y0), x2: this.sx(x1), y2: this.sy(y1),
                         class: cls || "pe-axis" }, this.node);
  }
  dot(x, y, r, cls) {
    return svg("circle", { cx: this.sx(x), cy: this.sy(y), r: r, class: "pe-fill " + (cls || "") }, this.node);
  }
  text(x, y, label, attrs) {
    const node = svg("text", Object.assign({ x: this.sx(x), y: this.sy(y) }, attrs || {}), this.node);
    node.textContent = label;
    return node;
  }
  // An arrow from (x0, y0) to (x1, y1) in data units; its head is drawn in pixels.
  arrow(x0, y0, x1, y1, cls) {
    const [a, b, c, d] = [this.sx(x0), this.sy(y0), this.sx(x1), this.sy(y1)];
    const len = Math.hypot(c - a, d - b);
    const g = svg("g", { class: cls || "" }, this.node);
    if (len < 1e-9) return g;
    const [ux, uy] = [(c - a) / len, (d - b) / len];
    const head = Math.min(11, 0.45 * len);
    svg("line", { x1: a, y1: b, x2: c - ux * head * 0.8, y2: d - uy * head * 0.8, class: "pe-line " + (cls || "") }, g);
    const p = (s, t) => `${(c - ux * s - uy * t).toFixed(1)},${(d - uy * s + ux * t).toFixed(1)}`;
    svg("polygon", { points: `${c.toFixed(1)},${d.toFixed(1)} ${p(head, head * 0.42)} ${p(head, -head * 0.42)}`,
                     class: "pe-fill " + (cls || ""), stroke: "none" }, g);
    return g;
  }
  // Axis ticks: [[value, label], ...] along x (below the frame) or y (left of it).
  xTicks(ticks, grid) {
    for (const [v, label] of ticks) {
      const x = this.sx(v);
      if (grid) svg("line", { x1: x, x2: x, y1: this.box.top, y2: this.box.bottom, class: "pe-gridline" }, this.node);
      svg("text", { x: x, y: this.box.bottom + 15, "text-anchor": "middle", class: "pe-tick" }, this.node).textContent = label;
    }
  }
  yTicks(ticks, grid) {
    for (const [v, label] of ticks) {
      const y = this.sy(v);
      if (grid) svg("line", { x1: this.box.left, x2: this.box.right, y1: y, y2: y, class: "pe-gridline" }, this.node);
      svg("text", { x: this.box.left - 5, y: y + 4, "text-anchor": "end", class: "pe-tick" }, this.node).textContent = label;
    }
  }
  border() {
    const b = this.box;
    svg("rect", { x: b.left, y: b.top, width: b.right - b.left, height: b.bottom - b.top, class: "pe-axis" }, this.node);
  }
}

class Explorer {
  constructor(root, data) {
    this.root = root;
    this.data = data;
    this.inputs = {};
    this.outputs = {};
    this.readouts = {};
    this.body = root.querySelector(".pe-body") || html("div", { class: "pe-body" }, root);
    this.controls = html("div", { class: "pe-controls" }, this.body);
    for (const [key, spec] of Object.entries(data.sliders)) this.slider(key, spec);
  }
  slider(key, spec) {
    const label = html("label", { class: "pe-slider" }, this.controls);
    html("span", { class: "pe-name" }, label).textContent = spec.label;
    const input = html("input", { type: "range", min: 0, max: spec.values.length - 1, step: 1,
                                  value: spec.index, "data-key": key }, label);
    const out = html("output", { "data-key": key }, label);
    this.inputs[key] = input;
    this.outputs[key] = out;
    input.addEventListener("input", () => this.update());
  }
  // Let a slider reach only its first `count` values (a probe inside a grid that shrinks).
  limit(key, count) {
    const input = this.inputs[key];
    input.max = Math.max(0, count - 1);
    if (Number(input.value) > count - 1) input.value = String(count - 1);
  }
  value(key) {
    const spec = this.data.sliders[key];
    return spec.values[Number(this.inputs[key].value)];
  }
  values() {
    const v = {};
    for (const key of Object.keys(this.inputs)) v[key] = this.value(key);
    return v;
  }
  showSliders() {
    for (const [key, spec] of Object.entries(this.data.sliders)) {
      const v = this.value(key);
      const text = spec.labels ? spec.labels[Number(this.inputs[key].value)] : fmt(v, spec.digits, spec.unit);
      const out = this.outputs[key];
      out.textContent = text;
      out.setAttribute("data-value", String(v));
      this.inputs[key].setAttribute("aria-valuetext", text);
    }
  }
  plot(height) {
    return new Plot(this.body, height);
  }
  key(items) {
    const key = html("div", { class: "pe-key" }, this.body);
    for (const [label, colour, style] of items) {
      const span = html("span", { class: style ? "pe-" + style : "", style: `--pe-key: var(--pe-${colour})` }, key);
      span.textContent = label;
    }
    return key;
  }
  readout(rows) {
    const list = html("dl", { class: "pe-readout" }, this.body);
    for (const [key, label] of rows) {
      const row = html("div", {}, list);
      html("dt", {}, row).textContent = label;
      this.readouts[key] = html("dd", { "data-key": key }, row);
    }
    return list;
  }
  show(key, value, text) {
    const dd = this.readouts[key];
    dd.setAttribute("data-value", String(value));
    dd.textContent = text === undefined ? fmt(value) : text;
  }
  note(text) {
    const p = html("p", { class: "pe-note" }, this.body);
    if (text) p.textContent = text;
    return p;
  }
  render(draw) {
    this.draw = draw;
    this.update();
    // draw again at the new width when the column changes (a phone turned, a sidebar shut)
    if (typeof ResizeObserver === "function") {
      let width = this.body.clientWidth;
      new ResizeObserver(() => {
        if (this.body.clientWidth !== width) { width = this.body.clientWidth; this.update(); }
      }).observe(this.body);
    }
  }
  update() {
    this.showSliders();
    this.draw(this.values());
    this.root.setAttribute("data-renders", String(Number(this.root.getAttribute("data-renders") || 0) + 1));
  }
}

// Start every explorer called `name` on the page that has not started yet: the one around
// the running script first (document.currentScript), then any other of that name (a page
// that shows one explorer twice, a front end that re-inserts outputs).
function start(name, build) {
  const roots = [];
  const own = document.currentScript && document.currentScript.closest(".pe-explorer");
  if (own) roots.push(own);
  for (const root of document.querySelectorAll(`.pe-explorer[data-explorer="${name}"]`))
    if (!roots.includes(root)) roots.push(root);
  for (const root of roots) {
    if (root.getAttribute("data-explorer") !== name || root.hasAttribute("data-ready")) continue;
    root.setAttribute("data-ready", "");
    const data = JSON.parse(root.querySelector("script.pe-data").textContent);
    const fallback = root.querySelector(".pe-fallback");
    if (fallback) fallback.remove();
    build(new Explorer(root, data), data);
  }
}
