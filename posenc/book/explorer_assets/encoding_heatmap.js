// Chapter 5: the sinusoidal encoding PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i),
// w_i = base^(-2i/D), as a heat map over positions and features, with one entry read out.
start("encoding-heatmap", (ui, data) => {
  const stops = data.colormap; // the book's diverging map, -1 .. 1
  const rgb = stops.map((h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16)));
  const colour = (v) => {
    const x = Math.min(1, Math.max(0, (v + 1) / 2)) * (rgb.length - 1);
    const i = Math.min(rgb.length - 2, Math.floor(x)), t = x - i;
    return rgb[i].map((a, j) => Math.round(a + (rgb[i + 1][j] - a) * t));
  };
  const canvas = document.createElement("canvas");
  const plot = ui.plot((w) => Math.round(Math.min(300, Math.max(220, 0.55 * w))));
  ui.readout([["value", "PE[p, j]"], ["pair", "pair i = ⌊j / 2⌋"], ["frequency", "w_i (rad / position)"],
              ["wavelength", "wavelength 2π / w_i"]]);
  ui.render(({ positions: T, dim: D, base, position, feature }) => {
    ui.limit("position", T);
    ui.limit("feature", D);
    ({ position, feature } = ui.values());
    ui.showSliders();
    const w = Array.from({ length: D / 2 }, (_, i) => Math.pow(base, -((2 * i) / D))); // posenc.sinusoidal_frequencies
    const pe = (p, j) => (j % 2 === 0 ? Math.sin(p * w[j >> 1]) : Math.cos(p * w[j >> 1]));
    canvas.width = D;
    canvas.height = T;
    const ctx = canvas.getContext("2d"), image = ctx.createImageData(D, T);
    for (let p = 0; p < T; p++)
      for (let j = 0; j < D; j++) {
        const [r, g, b] = colour(pe(p, j)), o = 4 * (p * D + j);
        image.data.set([r, g, b, 255], o);
      }
    ctx.putImageData(image, 0, 0);
    plot.begin(`sinusoidal encoding, ${T} positions by ${D} features, base ${base}`)
        .frame(0, D, T, 0, { left: 44, right: 34, top: 6, bottom: 34 });
    const b = plot.box;
    svg("image", { x: b.left, y: b.top, width: b.right - b.left, height: b.bottom - b.top,
                   preserveAspectRatio: "none", href: canvas.toDataURL(), style: "image-rendering: pixelated" }, plot.node);
    plot.border();
    plot.xTicks([[0.5, "0"], [D - 0.5, String(D - 1)]]);
    plot.yTicks([[0.5, "0"], [T - 0.5, String(T - 1)]]);
    plot.text(D / 2, T, "feature j", { dy: 28, "text-anchor": "middle" });
    plot.text(0, T / 2, "position p", { dx: -30, "text-anchor": "middle",
              transform: `rotate(-90 ${plot.sx(0) - 30} ${plot.sy(T / 2)})` });
    // the colour bar, -1 to 1
    const bar = svg("g", {}, plot.node), x = b.right + 10, step = (b.bottom - b.top) / 40;
    for (let k = 0; k < 40; k++)
      svg("rect", { x, y: b.top + k * step, width: 10, height: step + 0.5,
                    fill: `rgb(${colour(1 - (2 * (k + 0.5)) / 40).join(",")})` }, bar);
    for (const [v, label] of [[1, "1"], [0, "0"], [-1, "−1"]])
      svg("text", { x: x + 12, y: b.top + ((1 - v) / 2) * (b.bottom - b.top) + 4, class: "pe-tick" }, bar).textContent = label;
    // the entry read out: a box around cell (p, j)
    const cw = plot.sx(feature + 1) - plot.sx(feature), ch = plot.sy(position + 1) - plot.sy(position);
    const bw = Math.max(cw, 6) + 4, bh = Math.max(ch, 6) + 4;
    svg("rect", { x: plot.sx(feature) + cw / 2 - bw / 2, y: plot.sy(position) + ch / 2 - bh / 2,
                  width: bw, height: bh, class: "pe-line pe-ink pe-thin", fill: "none" }, plot.node);
    const i = feature >> 1;
    ui.show("value", pe(position, feature), `${feature % 2 ? "cos" : "sin"}(${position} w_${i}) = ${fmt(pe(position, feature), 4)}`);
    ui.show("pair", i, String(i));
    ui.show("frequency", w[i], fmt(w[i], "g"));
    ui.show("wavelength", (2 * Math.PI) / w[i], fmt((2 * Math.PI) / w[i], "g"));
  });
});
