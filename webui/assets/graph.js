// graph.js: a pipeline's graph (GET /pipelines/{name}: vertices and edges,
// the same ones ductile pipeline graph prints as Mermaid) drawn as SVG.
// Vertices are laid out in layers, each at the length of the longest path
// from the start, and ordered in their layer by where their predecessors
// sit, so branches stand side by side and joins below them.
import { s } from "./dom.js";

const W = 176, H = 46, COL = 196, ROW = 86, PAD = 14;

/** layout places each vertex: {x, y} of its centre, and the drawing's size. */
export function layout(graph) {
  const index = new Map(graph.vertices.map((v, i) => [v.id, i]));
  const preds = new Map(graph.vertices.map((v) => [v.id, []]));
  const succs = new Map(graph.vertices.map((v) => [v.id, []]));
  for (const e of graph.edges) {
    if (!index.has(e.from) || !index.has(e.to)) continue;
    succs.get(e.from).push(e.to);
    preds.get(e.to).push(e.from);
  }
  // Longest path from the start, in topological order (Kahn).
  const layer = new Map(graph.vertices.map((v) => [v.id, 0]));
  const indeg = new Map(graph.vertices.map((v) => [v.id, preds.get(v.id).length]));
  const ready = graph.vertices.filter((v) => indeg.get(v.id) === 0).map((v) => v.id);
  const seen = new Set();
  while (ready.length) {
    const id = ready.shift();
    seen.add(id);
    for (const to of succs.get(id)) {
      layer.set(to, Math.max(layer.get(to), layer.get(id) + 1));
      indeg.set(to, indeg.get(to) - 1);
      if (indeg.get(to) === 0) ready.push(to);
    }
  }
  // A cycle (a compiled pipeline has none): what is left goes below.
  let bottom = Math.max(0, ...layer.values());
  for (const v of graph.vertices) if (!seen.has(v.id)) layer.set(v.id, ++bottom);

  const rows = [];
  for (const v of graph.vertices) {
    const l = layer.get(v.id);
    (rows[l] ||= []).push(v.id);
  }
  const col = new Map();
  rows.forEach((row, l) => {
    if (l > 0) {
      const at = (id) => {
        const ps = preds.get(id).filter((p) => col.has(p));
        return ps.length ? ps.reduce((a, p) => a + col.get(p), 0) / ps.length : 0;
      };
      row.sort((a, b) => at(a) - at(b) || index.get(a) - index.get(b));
    }
    row.forEach((id, i) => col.set(id, i - (row.length - 1) / 2));
  });
  const widest = Math.max(1, ...rows.map((r) => (r ? r.length : 0)));
  const width = widest * COL + 2 * (PAD + 48); // room on each side for bends round the layers
  const pos = new Map();
  for (const v of graph.vertices) {
    pos.set(v.id, { x: width / 2 + col.get(v.id) * COL, y: PAD + H / 2 + layer.get(v.id) * ROW });
  }
  return { pos, width, height: rows.length * ROW - (ROW - H) + 2 * PAD };
}

const clip = (text, n = 24) => (text.length > n ? text.slice(0, n - 1) + "…" : text);

function shape(v, p) {
  const x = p.x - W / 2, y = p.y - H / 2;
  switch (v.kind) {
    case "start": case "end":
      return s("rect", { x, y, width: W, height: H, rx: H / 2 });
    case "gate":
      return s("polygon", { points: `${p.x},${y} ${x + W},${p.y} ${p.x},${y + H} ${x},${p.y}` });
    case "split":
      return s("polygon", { points: `${x + 14},${y} ${x + W - 14},${y} ${x + W},${p.y} ${x + W - 14},${y + H} ${x + 14},${y + H} ${x},${p.y}` });
    case "join":
      return s("circle", { cx: p.x, cy: p.y, r: H / 2 - 4 });
    default:
      return s("rect", { x, y, width: W, height: H, rx: 6 });
  }
}

/** draw is the SVG of graph; status(v) is the class and status a vertex
 * shows (a run's), or undefined; link(v) a page it links to, or "". */
export function draw(graph, status = () => undefined, link = () => "") {
  const { pos, width, height } = layout(graph);
  const kindOf = new Map(graph.vertices.map((v) => [v.id, v.kind]));
  const edges = graph.edges.filter((e) => pos.has(e.from) && pos.has(e.to)).map((e) => {
    const a = pos.get(e.from), b = pos.get(e.to);
    const cls = `g-edge${e.label === "false" ? " g-bypass" : ""}`;
    if (b.y - a.y > ROW * 1.5) {
      // Past a layer (a bypass, a branch shorter than its neighbour): out
      // of the outer side and round, not through the vertices between.
      const side = a.x + b.x < width ? -1 : 1;
      const x1 = a.x + side * W / 2, x2 = b.x + side * (kindOf.get(e.to) === "join" ? H / 2 - 4 : W / 2);
      const bend = side < 0 ? Math.min(x1, x2) - 40 : Math.max(x1, x2) + 40;
      return s("g", { class: cls },
        s("path", { d: `M${x1},${a.y} C${bend},${a.y} ${bend},${b.y} ${x2 + side * 2},${b.y}`, "marker-end": "url(#g-arrow)" }),
        e.label ? s("text", { x: x1 + side * 6, y: a.y - 6, class: "g-label", "text-anchor": side < 0 ? "end" : "start" }, e.label) : null);
    }
    const y1 = a.y + H / 2, y2 = b.y - H / 2, mid = (y1 + y2) / 2;
    return s("g", { class: cls },
      s("path", { d: `M${a.x},${y1} C${a.x},${mid} ${b.x},${mid} ${b.x},${y2}`, "marker-end": "url(#g-arrow)" }),
      e.label ? s("text", { x: (a.x + b.x) / 2 + 4, y: mid, class: "g-label" }, e.label) : null);
  });
  const vertices = graph.vertices.map((v) => {
    const p = pos.get(v.id);
    const st = status(v);
    const lines = v.kind === "step" ? [v.label, `${v.plugin}.${v.command}`] : [v.label];
    const label = v.kind === "join" ? [] : lines.map((t, i) => s("text", {
      x: p.x, y: p.y + (i - (lines.length - 1) / 2) * 16 + 5, class: i ? "g-sub" : "",
    }, clip(t, v.kind === "gate" ? 20 : 24)));
    const g = s("g", { class: `g-v g-${v.kind}${st ? " s-" + st : ""}`, "data-vertex": v.id, "data-node": v.node, "data-kind": v.kind, "data-status": st },
      s("title", {}, lines.join(" — ") + (st ? ` (${st})` : "")), shape(v, p), label,
      v.kind === "join" ? s("text", { x: p.x, y: p.y + 5 }, "join") : null);
    const href = link(v);
    return href ? s("a", { href, "aria-label": `${lines.join(" ")}${st ? ", " + st : ""}` }, g) : g;
  });
  return s("svg", { viewBox: `0 0 ${width} ${height}`, width, class: "graph", role: "group", "aria-label": "The pipeline as a graph" },
    s("defs", {}, s("marker", { id: "g-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      s("path", { d: "M0,0 L10,5 L0,10 z", class: "g-arrowhead" }))),
    edges, vertices);
}
