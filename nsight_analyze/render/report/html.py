"""HTML primitives and the page shell: escaping, tables with machine-readable cells, figures.

Why: the page is one self-contained file (plotly.js inlined once, no network) and must be safe
with hostile trace text (kernel names and NVTX strings come from the traced program). Every
string goes through `esc` (`render.escape.html`); figure JSON is embedded as an inert
`application/json` block with `<`, `>` and `&` written as JSON escapes, so no trace text can close
a tag or open a script. Colours come from `render.palette` (the JavaScript's too).
Numbers shown to people carry their exact value in `data-value`, so tests and scripts can read
the page without parsing formatted text.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from .. import palette
from ..escape import html as esc
from ..escape import script_json
from .timeline import SERIES_ORDER


def plain(value: Any) -> Any:
    """numpy/pandas scalars as plain Python (None for missing), for data-value and JSON."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def fmt(value: Any, kind: str = "") -> str:
    """Human text for a number: ns as ms/µs, % with two decimals, counts with separators."""
    v = plain(value)
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if kind == "ns" and isinstance(v, (int, float)):
        return f"{v / 1e6:,.3f} ms" if abs(v) >= 1e5 else f"{v / 1e3:,.2f} µs"
    if kind == "pct" and isinstance(v, (int, float)):
        return f"{v:.2f}%"
    if isinstance(v, float):
        return f"{v:,.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def safe_json(obj: Any) -> str:
    """JSON that cannot end a <script> block or start markup, whatever strings it carries."""
    return script_json(obj, default=plain)


def table(
    df: pd.DataFrame,
    columns: list[tuple[str, str, str]],
    table_id: str,
    max_rows: int | None = None,
    row_key: str | None = None,
) -> str:
    """A table whose cells hold `data-key` (column) and `data-value` (exact value); kind formats the text.

    columns: (column, header, kind) with kind '' | 'ns' | 'pct' | 'text'.
    """
    cols = [c for c in columns if c[0] in df.columns]
    head = "".join(f"<th>{esc(h)}</th>" for _, h, _ in cols)
    rows = []
    shown = df if max_rows is None else df.head(max_rows)
    for rec in shown.to_dict("records"):
        key = f' data-row="{esc(plain(rec[row_key]))}"' if row_key and row_key in rec else ""
        cells = []
        for col, _, kind in cols:
            v = plain(rec[col])
            num = isinstance(v, (int, float)) and not isinstance(v, bool)
            data = f' data-key="{esc(col)}" data-value="{esc("" if v is None else v)}"'
            cls = ' class="num"' if num else ""
            cells.append(f"<td{cls}{data}>{esc(fmt(v, kind))}</td>")
        rows.append(f"<tr{key}>{''.join(cells)}</tr>")
    more = ""
    if max_rows is not None and len(df) > max_rows:
        more = f'<p class="note">showing {max_rows:,} of {len(df):,} rows</p>'
    return (
        f'<div class="tablewrap"><table class="data" id="{esc(table_id)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>{more}"
    )


def kpi(label: str, metric: str, value: Any, text: str, sub: str = "") -> str:
    """One headline number: `data-metric` names it, `data-value` holds it exactly."""
    v = plain(value)
    return (
        f'<div class="kpi" data-metric="{esc(metric)}" data-value="{esc("" if v is None else v)}">'
        f'<div class="kpi-label">{esc(label)}</div><div class="kpi-value">{esc(text)}</div>'
        f'<div class="kpi-sub">{esc(sub)}</div></div>'
    )


def missing(reason: str) -> str:
    return f'<p class="missing">Not available: {esc(reason)}</p>'


def notes(lines: list[str]) -> str:
    if not lines:
        return ""
    return '<ul class="notes">' + "".join(f"<li>{esc(x)}</li>" for x in lines) + "</ul>"


def section(sid: str, title: str, body: str, intro: str = "") -> str:
    lead = f'<p class="intro">{esc(intro)}</p>' if intro else ""
    return f'<section id="{esc(sid)}" data-section="{esc(sid)}"><h2>{esc(title)}</h2>{lead}{body}</section>'


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1b2838;color:#fff;padding:16px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#cfd8e3}nav{padding:6px 28px;background:#eef2f6;font-size:13px}
nav a{margin-right:14px;color:#1b4f8a;text-decoration:none}main{padding:8px 28px 40px}
section{background:#fff;border:1px solid #e3e7ec;border-radius:6px;padding:12px 18px;margin:16px 0}
h2{font-size:18px;margin:4px 0 10px}h3{font-size:15px;margin:14px 0 6px}
.kpis{display:flex;flex-wrap:wrap;gap:10px}.kpi{border:1px solid #e3e7ec;border-radius:6px;padding:8px 12px;
min-width:150px;background:#f7f9fb}.kpi-label{font-size:12px;color:#555}.kpi-value{font-size:20px;font-weight:600}
.kpi-sub{font-size:12px;color:#666}table.data{border-collapse:collapse;font-size:12.5px;margin:6px 0}
table.data th,table.data td{border-bottom:1px solid #eceff3;padding:3px 8px;text-align:left;
vertical-align:top}
table.data td.num{text-align:right;font-variant-numeric:tabular-nums}table.data th{background:#f3f5f8}
.tablewrap{overflow-x:auto;max-width:100%}td{word-break:break-word;max-width:640px}
.note,.notes{color:#6b4e00;overflow-wrap:anywhere}.missing{color:#8a1f11}.intro{color:#555}.figure{min-height:200px}
SEVERITY_CSS
.finding{border-left:4px solid #ccd;padding:4px 10px;margin:8px 0}dl.defs dt{font-weight:600;margin-top:6px}
dl.defs dd{margin:2px 0 4px 16px}#js-errors{display:none;background:#fdd;color:#800;padding:8px 28px}
details summary{cursor:pointer;color:#1b4f8a}
""".replace(
    "SEVERITY_CSS",
    palette.css_rules(".sev-{key}", "color", palette.SEVERITY) + ".sev-high,.sev-medium{font-weight:600}",
)

PAGE_JS = """
window.__reportErrors = [];
function reportError(msg){ window.__reportErrors.push(String(msg));
  var b=document.getElementById('js-errors');
  if(b){ b.style.display='block'; b.textContent='Figure error: '+msg; } }
window.addEventListener('error', function(e){ reportError(e.message); });
PALETTE_JS
function dur(ns){ return ns >= 1e5 ? (ns/1e6).toFixed(3)+' ms' : (ns/1e3).toFixed(2)+' µs'; }
function timelineTraces(p){
  var traces = [], cats = Object.keys(p.series);
  cats.sort(function(a,b){ return ORDER.indexOf(a)-ORDER.indexOf(b); });
  cats.forEach(function(cat){
    var s = p.series[cat], n = s.s.length, x = new Array(4*n), y = new Array(4*n), t = new Array(4*n);
    for (var i = 0; i < n; i++){
      var a = s.s[i]/1e6, b = s.e[i]/1e6, lane = s.lane[i], name = p.names[s.name[i]], text;
      if (s.n[i] > 1) text = s.n[i]+' '+cat+' operations merged (rank '+s.rank[i]+')<br>busy '+dur(s.busy[i])+
        '<br>longest: '+name;
      else if (IDLE[cat]) text = 'idle: '+cat+' (rank '+s.rank[i]+')'+(name ? '<br>host: '+name : '')+
        '<br>duration '+dur(s.e[i]-s.s[i]);
      else text = name+'<br>rank '+s.rank[i]+' · stream '+s.stream[i]+' · '+cat+
        '<br>duration '+dur(s.e[i]-s.s[i]);
      text += '<br>start +'+a.toFixed(6)+' ms';
      var k = 4*i; x[k]=a; x[k+1]=(a+b)/2; x[k+2]=b; x[k+3]=null;
      y[k]=lane; y[k+1]=lane; y[k+2]=lane; y[k+3]=null;
      t[k]=text; t[k+1]=text; t[k+2]=text; t[k+3]=null;
    }
    traces.push({type:'scatter', mode:'lines', name:(IDLE[cat] ? 'idle: ' : '')+cat, x:x, y:y, hovertext:t,
      hoverinfo:'text', connectgaps:false, line:{color:COLORS[cat]||UNKNOWN_COLOR, width:9}});
  });
  return traces;
}
function timelineTicks(p, layout){
  var vals = [], text = [];
  p.ranks.forEach(function(r, i){ p.rows.forEach(function(row, j){
    vals.push(i*p.rows.length+j); text.push('r'+r+' '+row); }); });
  layout.yaxis.tickvals = vals; layout.yaxis.ticktext = text; return layout;
}
function renderAll(){
  var figs = JSON.parse(document.getElementById('figure-data').textContent), jobs = [];
  Object.keys(figs).forEach(function(id){
    var div = document.getElementById('fig-'+id), f = figs[id], data = f.data, layout = f.layout;
    if (!div) return;
    try {
      if (f.timeline){ data = timelineTraces(f.timeline); layout = timelineTicks(f.timeline, layout); }
      jobs.push(Plotly.newPlot(div, data, layout, {responsive:true, displaylogo:false}).then(function(){
        div.dataset.rendered = 'true'; div.dataset.traces = String(div.data.length); }));
    } catch (e) { reportError(id+': '+e); }
  });
  Promise.all(jobs).then(function(){ document.body.dataset.figuresRendered = String(jobs.length); },
                         function(e){ reportError(e); document.body.dataset.figuresRendered = 'error'; });
}
if (typeof Plotly === 'undefined') reportError('plotly.js did not load'); else renderAll();
""".replace(
    "PALETTE_JS",
    "\n".join(
        [
            palette.js_object("IDLE", {c: 1 for c in palette.IDLE_CAUSES}),
            palette.js_object("COLORS", palette.CATEGORY),
            f"var ORDER = {json.dumps(list(SERIES_ORDER))};",
            f"var UNKNOWN_COLOR = {json.dumps(palette.UNKNOWN)};",
        ]
    ),
)


def page(
    title: str, subtitle: str, nav: list[tuple[str, str]], body: str, figures: dict[str, Any], plotly_js: str
) -> str:
    """The whole document: plotly.js inlined once, the figures' JSON, then the renderer."""
    links = "".join(f'<a href="#{esc(sid)}">{esc(label)}</a>' for sid, label in nav)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{esc(title)}</title>'
        f"<style>{CSS}</style></head><body>"
        f"<header><h1>{esc(title)}</h1><p>{esc(subtitle)}</p></header><nav>{links}</nav>"
        '<div id="js-errors"></div>'
        f"<main>{body}</main>"
        f'<script type="application/json" id="figure-data">{safe_json(figures)}</script>'
        f"<script>{plotly_js}</script><script>{PAGE_JS}</script></body></html>\n"
    )
