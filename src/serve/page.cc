// The page of GET / (page.h). Element ids the browser test reads: #text,
// #translate, #translation, #heatmap (a table whose cells, class "cell",
// carry data-source, data-target and data-weight), #hover, #status, #model
// (the served models' names, from GET /models; shown when there are several).
#include "serve/page.h"

namespace nmt {
namespace {

constexpr const char kPage[] = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>nmt-serve</title>
<style>
  body { font: 15px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 70em; padding: 0 1em; color: #222; }
  textarea { width: 100%; height: 4.5em; font: inherit; box-sizing: border-box; }
  .controls { margin: .5em 0; display: flex; gap: 1.2em; align-items: center; flex-wrap: wrap; }
  #translation { font-size: 1.25em; margin: .8em 0; min-height: 1.4em; }
  #status { color: #a00; min-height: 1.2em; }
  #hover { font-family: ui-monospace, monospace; min-height: 1.4em; margin: .4em 0; }
  table#heatmap { border-collapse: collapse; margin-top: .5em; }
  #heatmap td.cell { width: 26px; height: 26px; padding: 0; border: 1px solid #ddd; }
  #heatmap td.cell:hover { outline: 2px solid #e33; }
  #heatmap th { font-weight: normal; font-family: ui-monospace, monospace; font-size: 13px; padding: 2px 6px; }
  #heatmap th.src { writing-mode: vertical-rl; transform: rotate(180deg); vertical-align: bottom; text-align: left; }
  #heatmap th.tgt { text-align: right; }
</style>
</head>
<body>
<h1>nmt-serve</h1>
<textarea id="text" placeholder="A sentence to translate">a man is riding a bicycle .</textarea>
<div class="controls">
  <button id="translate">Translate</button>
  <label id="model-label" hidden>model <select id="model"></select></label>
  <label>beam <input id="beam" type="number" min="1" max="16" value="1" style="width:4em"></label>
  <label><input type="radio" name="level" value="piece" checked> pieces</label>
  <label><input type="radio" name="level" value="word"> words</label>
</div>
<div id="status"></div>
<div id="translation"></div>
<div id="hover">&nbsp;</div>
<table id="heatmap"></table>
<script>
"use strict";
const $ = (id) => document.getElementById(id);

function level() { return document.querySelector("input[name=level]:checked").value; }

// The heatmap: one row per target token, one column per source token; weight w as gray 255 * w.
function draw(att) {
  const table = $("heatmap");
  table.textContent = "";
  const head = table.insertRow();
  head.appendChild(document.createElement("th"));
  for (const s of att.source) {
    const th = document.createElement("th");
    th.className = "src";
    th.textContent = s;
    head.appendChild(th);
  }
  att.target.forEach((t, i) => {
    const row = table.insertRow();
    const th = document.createElement("th");
    th.className = "tgt";
    th.textContent = t;
    row.appendChild(th);
    att.weights[i].forEach((w, j) => {
      const td = row.insertCell();
      const g = Math.round(255 * Math.min(1, Math.max(0, w)));
      td.className = "cell";
      td.style.background = `rgb(${g},${g},${g})`;
      td.dataset.source = att.source[j];
      td.dataset.target = t;
      td.dataset.weight = w.toFixed(4);
      td.title = `${att.source[j]} \u2192 ${t}: ${w.toFixed(4)}`;
      td.addEventListener("mouseenter", () => { $("hover").textContent = td.title; });
    });
  });
}

async function translate() {
  $("status").textContent = "";
  const body = { text: [$("text").value.replace(/\s+/g, " ").trim()], beam_size: Number($("beam").value),
                 alignment: "soft", level: level() };
  if ($("model").value) body.model = $("model").value;
  try {
    const res = await fetch("/translate", { method: "POST", headers: { "Content-Type": "application/json" },
                                            body: JSON.stringify(body) });
    const data = await res.json();
    if (!res.ok) { $("status").textContent = `${res.status}: ${data.error}`; return; }
    const t = data.translations[0];
    $("translation").textContent = t.text;
    draw(t.attention);
    document.body.dataset.done = String(Number(document.body.dataset.done || 0) + 1);
  } catch (e) {
    $("status").textContent = String(e);
  }
}

// The model choice: every served model by name, the server's default first selected.
async function listModels() {
  try {
    const data = await (await fetch("/models")).json();
    for (const m of data.models) {
      const o = document.createElement("option");
      o.value = o.textContent = m.name;
      o.selected = m.name === data.default;
      $("model").appendChild(o);
    }
    $("model-label").hidden = data.models.length < 2;
  } catch (e) {
    $("status").textContent = String(e);
  }
}

listModels();
$("model").addEventListener("change", translate);
$("translate").addEventListener("click", translate);
for (const r of document.querySelectorAll("input[name=level]")) r.addEventListener("change", translate);
$("text").addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); translate(); } });
</script>
</body>
</html>
)HTML";

}  // namespace

const std::string& page_html() {
  static const std::string html = kPage;
  return html;
}

}  // namespace nmt
