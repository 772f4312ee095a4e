// Chapter 12: RoPE's ladder of periods, stretched by a context-extension method, and the
// pairs that meet angles unseen in training by distance round(s (L - 1)).
start("scaling", (ui, data) => {
  const TWO_PI = 2 * Math.PI;
  const ropeInvFreq = (D, base) => Array.from({ length: D / 2 }, (_, i) => Math.pow(base, -((2 * i) / D)));
  // posenc.scaling, formula by formula
  const methods = [
    (f) => f,
    (f, D, base, s) => f.map((x) => x / s),
    (f, D, base, s) => ropeInvFreq(D, base * Math.pow(s, D / (D - 2))),
    (f, D, base, s, L) => { // YaRN, beta_fast 32, beta_slow 1
      const index = (turns) => (D * Math.log(L / (turns * 2 * Math.PI))) / (2 * Math.log(base));
      let ramp;
      if (index(1) < 0) ramp = f.map(() => 1);
      else {
        const lo = Math.max(Math.floor(index(32)), 0), hi = Math.min(Math.ceil(index(1)), D - 1);
        ramp = f.map((_, i) => Math.min(1, Math.max(0, (i - lo) / Math.max(hi - lo, 1e-3))));
      }
      return f.map((x, i) => (x / s) * ramp[i] + x * (1 - ramp[i]));
    },
    (f, D, base, s, L) => f.map((x) => { // llama3, low_freq_factor 1, high_freq_factor 4
      const wavelen = (2 * Math.PI) / x, smooth = (L / wavelen - 1) / (4 - 1);
      const out = wavelen > L / 1 ? x / s : (1 - smooth) * (x / s) + smooth * x;
      return wavelen < L / 4 ? x : out;
    }),
  ];
  ui.key([["original", "grey", "dash"], ["scaled", "blue"], ["at unseen angles", "red", "dot"]]);
  const plot = ui.plot((w) => Math.round(Math.min(270, Math.max(210, 0.5 * w))));
  ui.readout([["unseen", "pairs at unseen angles"], ["largest", "largest angle / trained arc"],
              ["kept", "pairs kept"], ["divided", "pairs divided by s"],
              ["frequency", "θ′_i of pair i"], ["period", "period of pair i"],
              ["overshoot", "pair i: angle / trained arc"]]);
  const note = ui.note();
  ui.render(({ base, dim: D, train_length: L, method, factor: s, pair }) => {
    ui.limit("pair", D / 2);
    pair = ui.value("pair");
    ui.showSliders();
    const f = ropeInvFreq(D, base), g = methods[method](f, D, base, s, L);
    const distance = roundHalfEven(s * (L - 1));
    // posenc.book.frequencies.angle_overshoot(distance, L, g, f)
    const over = g.map((x, i) => {
      const seen = (L - 1) * f[i], reached = distance * x;
      return seen >= TWO_PI ? Math.min(reached / TWO_PI, 1) : reached / Math.max(seen, 1e-300);
    });
    const unseen = over.filter((v) => v > 1 + 1e-9).length;
    const close = (a, b) => Math.abs(a - b) <= 1e-9 * Math.abs(b); // torch.isclose(rtol=1e-9, atol=0)
    const periods = (h) => h.map((x) => TWO_PI / x);
    const [p0, p1] = [periods(f), periods(g)];
    const top = Math.ceil(Math.log10(Math.max(...p1, ...p0, s * L) * 1.5));
    plot.begin(`periods of the ${D / 2} pairs, ${data.labels[method]}`)
        .frame(-0.5, D / 2 - 0.5, 0, top, { left: 46, bottom: 32 });
    const lg = (v) => Math.log10(v);
    const b = plot.box;
    svg("rect", { x: b.left, width: b.right - b.left, y: plot.sy(lg(s * L)), height: Math.max(1, plot.sy(lg(L)) - plot.sy(lg(s * L))),
                  class: "pe-band" }, plot.node);
    const ticks = [];
    for (let e = 0; e <= top; e += top > 6 ? 2 : 1) ticks.push([e, e === 0 ? "1" : `1e${e}`]);
    plot.yTicks(ticks, true);
    const every = Math.max(1, Math.ceil(D / 2 / 8));
    plot.xTicks(Array.from({ length: Math.floor((D / 2 - 1) / every) + 1 }, (_, k) => [k * every, String(k * every)]));
    plot.border();
    plot.text(D / 4 - 0.5, 0, "pair index i", { dy: 28, "text-anchor": "middle" });
    plot.text(-0.5, lg(Math.sqrt(s) * L), s > 1 ? `context L to ${fmt(s, "g")}L` : "context L", { dx: 6, dy: 4, class: "pe-tick" });
    plot.line(p0.map((p, i) => [i, lg(p)]), "pe-grey pe-thin pe-dashed");
    plot.line(p1.map((p, i) => [i, lg(p)]), "pe-blue");
    p1.forEach((p, i) => { if (over[i] > 1 + 1e-9) plot.dot(i, lg(p), 3.5, "pe-red"); });
    svg("circle", { cx: plot.sx(pair), cy: plot.sy(lg(p1[pair])), r: 6, class: "pe-hollow pe-ink", fill: "none" }, plot.node);
    ui.show("unseen", unseen, `${unseen} of ${D / 2}`);
    ui.show("largest", Math.max(...over), fmt(Math.max(...over), "g"));
    ui.show("kept", g.filter((x, i) => close(x / f[i], 1)).length, String(g.filter((x, i) => close(x / f[i], 1)).length));
    ui.show("divided", g.filter((x, i) => close(x / f[i], 1 / s)).length, String(g.filter((x, i) => close(x / f[i], 1 / s)).length));
    ui.show("frequency", g[pair], fmt(g[pair], "g"));
    ui.show("period", p1[pair], fmt(p1[pair], "g") + " positions");
    ui.show("overshoot", over[pair], fmt(over[pair], "g"));
    note.textContent = `Trained on L = ${L.toLocaleString("en-US")} positions, run to distance ${distance.toLocaleString("en-US")}: ` +
      (unseen ? `${unseen} slow pairs turn past the arc they met in training.` : "every pair stays within the angles it met in training.");
  });
});
