// Chapter 9: one pair of a query at position m and of a key at position n, turned by RoPE,
// and the score q . k of the whole vectors, which depends on n - m only.
start("rope", (ui, data) => {
  const { q, k, base } = data, D = q.length;
  const theta = Array.from({ length: D / 2 }, (_, i) => Math.pow(base, -((2 * i) / D))); // rope_inv_freq
  // posenc.rope.apply_rope, interleaved layout: pair i is features 2i, 2i + 1
  const rope = (x, pos) => x.map((_, j) => {
    const a = pos * theta[j >> 1], c = Math.cos(a), s = Math.sin(a), x1 = x[j & ~1], x2 = x[j | 1];
    return j % 2 === 0 ? x1 * c - x2 * s : x1 * s + x2 * c;
  });
  ui.key([["query pair", "blue"], ["key pair", "orange"], ["before rotation", "grey", "dash"]]);
  const plot = ui.plot((w) => Math.round(Math.min(280, w * 0.75)));
  ui.readout([["query_position", "query at m + s"], ["key_position", "key at n + s"],
              ["offset", "offset n − m"], ["theta", "θ_i (rad / position)"],
              ["angle", "angle query → key"], ["pair_score", "score of pair i"],
              ["score", "score q · k (all pairs)"]]);
  ui.note("Move m and n by the same amount, or move s: the angle and both scores stay put.");
  ui.render(({ m, n, shift, pair }) => {
    const pm = m + shift, pn = n + shift;
    const rq = rope(q, pm), rk = rope(k, pn);
    const qp = [q[2 * pair], q[2 * pair + 1]], kp = [k[2 * pair], k[2 * pair + 1]];
    const rqp = [rq[2 * pair], rq[2 * pair + 1]], rkp = [rk[2 * pair], rk[2 * pair + 1]];
    let score = 0;
    for (let j = 0; j < D; j++) score += rq[j] * rk[j];
    // from the rotated query pair to the rotated key pair, counter-clockwise, in (-pi, pi]
    let angle = Math.atan2(rkp[1], rkp[0]) - Math.atan2(rqp[1], rqp[0]);
    angle -= 2 * Math.PI * Math.round(angle / (2 * Math.PI));
    if (angle === -Math.PI) angle = Math.PI;
    const radius = Math.max(Math.hypot(...qp), Math.hypot(...kp)), reach = 1.2 * radius;
    plot.begin(`pair ${pair}: query at ${pm}, key at ${pn}`);
    const half = plot.h / 2, cx = plot.w / 2;
    plot.frame(-reach, reach, -reach, reach, { left: cx - half, right: plot.w - cx - half, top: 0, bottom: 0 });
    plot.segment(-reach, 0, reach, 0, "pe-gridline");
    plot.segment(0, -reach, 0, reach, "pe-gridline");
    const ring = Array.from({ length: 121 }, (_, i) => (i * Math.PI) / 60);
    for (const r of [Math.hypot(...qp), Math.hypot(...kp)])
      plot.line(ring.map((a) => [r * Math.cos(a), r * Math.sin(a)]), "pe-grey pe-thin");
    plot.arrow(0, 0, qp[0], qp[1], "pe-blue pe-faint pe-thin pe-dashed");
    plot.arrow(0, 0, kp[0], kp[1], "pe-orange pe-faint pe-thin pe-dashed");
    plot.arrow(0, 0, rqp[0], rqp[1], "pe-blue");
    plot.arrow(0, 0, rkp[0], rkp[1], "pe-orange");
    plot.text(-reach, reach, `x: feature ${2 * pair}, y: feature ${2 * pair + 1}`, { dy: 14, dx: 4, class: "pe-tick" });
    ui.show("query_position", pm, String(pm));
    ui.show("key_position", pn, String(pn));
    ui.show("offset", pn - pm, String(pn - pm));
    ui.show("theta", theta[pair], fmt(theta[pair], "g"));
    ui.show("angle", angle, fmt(angle, 3) + " rad");
    ui.show("pair_score", rqp[0] * rkp[0] + rqp[1] * rkp[1]);
    ui.show("score", score);
  });
});
