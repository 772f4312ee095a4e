// Chapter 4: the wave A sin(f t + phi), its cosine partner, and the pair (sin, cos) at one t.
start("sine-wave", (ui, data) => {
  const turns = data.turns;
  const tMax = turns * 2 * Math.PI;
  ui.key([["A sin(f t + φ)", "blue"], ["A cos(f t + φ)", "orange"], ["sin t", "grey", "dash"]]);
  const plot = ui.plot((w) => Math.round(Math.min(260, Math.max(200, 0.5 * w))));
  ui.readout([["angle", "angle f t + φ"], ["sin", "A sin(f t + φ)"], ["cos", "A cos(f t + φ)"],
              ["period", "period 2π / f"]]);
  ui.render(({ amplitude: A, frequency: f, phase: phi, t }) => {
    // as posenc.book.waves.wave; the cosine is the sine a quarter turn ahead, as the figure draws it
    const wave = (x, phase) => A * Math.sin(f * x + phase);
    const limit = Math.max(3.3, 1.1 * A);
    plot.begin(`A = ${fmt(A, 2)}, f = ${fmt(f, 2)}, φ = ${fmt(phi, 2, "pi")}`)
        .frame(0, tMax, -limit, limit, { left: 30 });
    const quarters = [];
    for (let k = 0; k <= 4 * turns; k += 2) quarters.push([k * Math.PI / 2, k === 0 ? "0" : `${k / 2}π`]);
    plot.xTicks(quarters, true);
    plot.yTicks([[-3, "−3"], [0, "0"], [3, "3"]], true);
    plot.border();
    const n = 600, xs = Array.from({ length: n + 1 }, (_, i) => (i / n) * tMax);
    plot.line(xs.map((x) => [x, Math.sin(x)]), "pe-grey pe-thin pe-dashed");
    plot.line(xs.map((x) => [x, wave(x, phi)]), "pe-blue");
    plot.line(xs.map((x) => [x, wave(x, phi + Math.PI / 2)]), "pe-orange");
    plot.segment(t, -limit, t, limit, "pe-gridline");
    const s = wave(t, phi), c = wave(t, phi + Math.PI / 2);
    plot.dot(t, s, 5, "pe-blue");
    plot.dot(t, c, 5, "pe-orange");
    ui.show("angle", f * t + phi, fmt(f * t + phi, 3) + " rad");
    ui.show("sin", s);
    ui.show("cos", c);
    ui.show("period", (2 * Math.PI) / f, fmt((2 * Math.PI) / f, 3));
  });
});
