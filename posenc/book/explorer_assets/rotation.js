// Chapter 6: a vector v, the rotation R(angle), and R v.
start("rotation", (ui) => {
  ui.key([["v", "blue"], ["R v", "orange"], ["angle swept", "green"]]);
  const plot = ui.plot((w) => Math.round(Math.min(300, w * 0.8)));
  ui.readout([["r00", "R[0,0] = cos"], ["r01", "R[0,1] = −sin"], ["r10", "R[1,0] = sin"],
              ["r11", "R[1,1] = cos"], ["rv0", "(R v)₀"], ["rv1", "(R v)₁"],
              ["norm_v", "|v|"], ["norm_rv", "|R v|"]]);
  ui.render(({ angle, x, y }) => {
    const theta = angle * (Math.PI / 180); // as Python's math.radians
    const c = Math.cos(theta), s = Math.sin(theta);
    const rv = [c * x + -s * y, s * x + c * y];
    const r = Math.hypot(x, y), reach = 1.25 * Math.max(1, r);
    plot.begin(`rotation by ${angle} degrees`);
    const half = Math.min(plot.w, plot.h) / 2;
    const cx = plot.w / 2;
    plot.frame(-reach, reach, -reach, reach, { left: cx - half, right: plot.w - cx - half, top: 0, bottom: 0 });
    plot.segment(-reach, 0, reach, 0, "pe-gridline");
    plot.segment(0, -reach, 0, reach, "pe-gridline");
    const ring = Array.from({ length: 121 }, (_, i) => i * Math.PI / 60);
    plot.line(ring.map((a) => [r * Math.cos(a), r * Math.sin(a)]), "pe-grey pe-thin");
    const start = Math.atan2(y, x);
    const arc = Array.from({ length: 61 }, (_, i) => start + (theta * i) / 60);
    if (r > 0) plot.line(arc.map((a) => [0.35 * r * Math.cos(a), 0.35 * r * Math.sin(a)]), "pe-green pe-thin");
    plot.arrow(0, 0, x, y, "pe-blue");
    plot.arrow(0, 0, rv[0], rv[1], "pe-orange");
    for (const [key, v] of [["r00", c], ["r01", -s], ["r10", s], ["r11", c], ["rv0", rv[0]], ["rv1", rv[1]]])
      ui.show(key, v);
    ui.show("norm_v", r);
    ui.show("norm_rv", Math.hypot(rv[0], rv[1]));
  });
});
