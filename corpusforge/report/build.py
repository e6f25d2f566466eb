"""``corpusforge report DATASET``: what happened to the data, for a person (HTML) and a program (JSON).

Sections (those that apply to the dataset): the stage funnel (records in, kept, rejected by stage
and reason, from the run's stats.json); distributions (document length, tokens, every score
column, languages; image resolution and blur; point counts); deduplication (cluster sizes and
near-duplicate pairs side by side); PII counts by type and the recognizers that were active;
the mixture (requested vs achieved); the curriculum (difficulty over position); a sample viewer
(kept records and rejected ones per reason; images as thumbnails). Every number in the HTML
comes from ``report.json``.
"""

from __future__ import annotations

import base64
import io
from html import escape
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from corpusforge.io.dataset import MANIFEST, REJECTED, REPORT_HTML, REPORT_JSON, STATS, Dataset
from corpusforge.io.storage import Store
from corpusforge.report import svg

MAX_ROWS = 200_000          # rows read for distributions (the first ones, in manifest order)
CLUSTER_TAGS = ("tag_minhash_cluster", "tag_image_cluster")     # a near-duplicate cluster's representative id
LIGHT = ("source", "lang", "n_tokens", "width", "height", "format", "n_points", "reject_stage", "reject_reason",
         "id") + CLUSTER_TAGS


def _table(ds: Dataset | None, text: bool = False):
    if ds is None or not ds.manifest["shards"]:
        return None
    names = ds.arrow_schema().names
    cols = [c for c in names if c in LIGHT or c.startswith(("score_", "count_"))]
    if text and "text" in names:
        cols.append("text")
    tables, n = [], 0
    for i in range(len(ds.manifest["shards"])):
        t = ds.read_shard(i, columns=cols)
        tables.append(t)
        n += t.num_rows
        if n >= MAX_ROWS:
            break
    import pyarrow as pa

    return pa.concat_tables(tables).slice(0, MAX_ROWS)


def _hist(values, bins: int = 30) -> dict:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if not len(v):
        return {"edges": [], "counts": [], "n": 0}
    counts, edges = np.histogram(v, bins=bins)
    return {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts], "n": int(len(v)),
            "mean": float(v.mean()), "median": float(np.median(v))}


def summarize(root: str | Path) -> dict:
    ds = Dataset.open(root)
    store = ds.store
    m = ds.manifest
    stats = store.read_json(store.join(STATS)) if store.exists(store.join(STATS)) else {}
    rej = (Dataset.open(store.display(store.join(REJECTED)))
           if store.exists(store.join(REJECTED, MANIFEST)) else None)
    kept, rejected = _table(ds, text=True), _table(rej, text=True)
    # the folder's name, not its path: like the manifest, the report is the same wherever it is written
    s: dict = {"dataset": store.root.rsplit("/", 1)[-1], "schema": m["schema"], "rows": m["rows"], "bytes": m["bytes"],
               "shards": len(m["shards"]), "sources": m.get("sources", {}), "order": m.get("order", {})}
    if "stages" in stats:
        read = stats["read"]
        funnel = [{"stage": "read", "in": read["records"] + read["rejected"], "kept": read["records"],
                   "rejected": read["rejected"], "by_reason": read["rejected_by_reason"]}]
        funnel += [{"stage": v["stage"], "in": v["rows_in"], "kept": v["kept"], "rejected": v["rejected"],
                    "created": v.get("created", 0), "by_reason": v["rejected_by_reason"], "counters": v.get("counters", {})}
                   for v in stats["stages"].values()]
        s["funnel"] = funnel
        if stats.get("warnings"):
            s["warnings"] = stats["warnings"]
        s["totals"] = stats["totals"]
    dist = {}
    if kept is not None:
        if "text" in kept.column_names:
            dist["characters"] = _hist(pc.utf8_length(kept.column("text")).to_pylist())
        for col in ("n_tokens", "width", "height", "n_points"):
            if col in kept.column_names:
                dist[col] = _hist(kept.column(col).to_pylist())
        for col in sorted(c for c in kept.column_names if c.startswith("score_")):
            dist[col] = _hist(kept.column(col).to_pylist())
        if "lang" in kept.column_names:
            vc = pc.value_counts(kept.column("lang").fill_null("unknown"))
            s["languages"] = dict(sorted(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()),
                                         key=lambda kv: -kv[1]))
    s["distributions"] = dist
    show = _shown_text(m)
    s["dedup"] = _dedup(kept, rejected, show)
    spans = _repeated_spans(stats, show)
    if spans:
        s["dedup"]["repeated_spans"] = spans
    s["pii"] = _pii(m, kept, rejected)
    if "mixture" in m:
        s["mixture"] = m["mixture"]
    if stats.get("difficulty_curve"):
        s["curriculum"] = {"score": m.get("order", {}).get("score"), "curve": stats["difficulty_curve"]}
    s["samples"] = _samples(kept, rejected, m["schema"]["name"], ds, rej, show)
    return s


def _shown_text(manifest):
    """How a text sample is shown: scrubbed by the pipeline's own ``text.pii`` config when the
    pipeline has one (rejected rows and the originals of removed duplicates can precede the
    scrubbing stage: the report must not show what the dataset itself never shows), then cut."""
    configs = [st["config"] for st in manifest.get("lineage", {}).get("stages", []) if st.get("name") == "text.pii"]
    if not configs:
        return lambda text, n: text[:n]
    import pyarrow as pa

    from corpusforge.stage import StageStats
    from corpusforge.text.pii import Pii

    stage = Pii(Pii.Config(**configs[-1]))

    def show(text: str, n: int) -> str:
        res = stage.process(pa.table({"text": [text], "lang": pa.nulls(1, pa.string())}), StageStats())
        if res.kept.num_rows == 0:
            return "[not shown: holds personal data the pipeline drops]"
        return res.kept.column("text")[0].as_py()[:n]
    return show


def _dedup(kept, rejected, show) -> dict:
    out = {}
    tags = []
    for t in (kept, rejected):
        for col in CLUSTER_TAGS:
            if t is not None and col in t.column_names:
                tags += [x for x in t.column(col).to_pylist() if x]
    if tags:
        sizes = np.unique(np.unique(tags, return_counts=True)[1], return_counts=True)
        out["cluster_sizes"] = {int(k): int(v) for k, v in zip(*sizes)}
        out["clusters"] = int(sum(out["cluster_sizes"].values()))
    if rejected is not None and kept is not None and "reject_reason" in rejected.column_names \
            and "tag_minhash_cluster" in rejected.column_names and "text" in rejected.column_names:
        by_id = dict(zip(kept.column("id").to_pylist(), kept.column("text").to_pylist()))
        pairs = []
        for reason, rep, text in zip(rejected.column("reject_reason").to_pylist(),
                                     rejected.column("tag_minhash_cluster").to_pylist(),
                                     rejected.column("text").to_pylist()):
            if reason == "near_duplicate" and rep in by_id:
                pairs.append({"kept": show(by_id[rep], 400), "removed": show(text, 400)})
            if len(pairs) == 3:
                break
        out["examples"] = pairs
    return out


def _repeated_spans(stats: dict, show) -> dict:
    """What text.substring_dedup cut: bytes per source and the most repeated spans (their text
    shown as samples are, through the pipeline's own PII scrubbing)."""
    for v in stats.get("stages", {}).values():
        if v.get("stage") != "text.substring_dedup":
            continue
        c = v.get("counters", {})
        per_source = {k[len("bytes_cut["):-1]: n for k, n in c.items() if k.startswith("bytes_cut[")}
        top = sorted(((k[len("repeated_span: "):], n) for k, n in c.items() if k.startswith("repeated_span: ")),
                     key=lambda kv: (-kv[1], kv[0]))
        return {"bytes_cut": c.get("bytes_cut", 0), "spans_cut": c.get("spans_cut", 0),
                "documents_with_cuts": c.get("documents_with_cuts", 0),
                "bytes_cut_by_source": dict(sorted(per_source.items(), key=lambda kv: -kv[1])),
                "top_spans": [{"occurrences": n, "text": show(t, 300)} for t, n in top]}
    return {}


def _pii(manifest, kept, rejected) -> dict:
    counts = {}
    for t in (kept, rejected):
        if t is None:
            continue
        for c in t.column_names:
            if c.startswith("count_pii_"):
                counts[c[len("count_pii_"):].upper()] = counts.get(c[len("count_pii_"):].upper(), 0) + int(
                    pc.sum(t.column(c)).as_py() or 0)
    active = None
    for st in manifest.get("lineage", {}).get("stages", []):
        if st.get("name") == "text.pii":
            active = st["config"].get("entities")
    if active is None and not counts:
        return {}
    return {"replaced_by_type": dict(sorted(counts.items(), key=lambda kv: -kv[1])), "active_entities": active,
            "note": "names and places (PERSON, LOCATION) are scrubbed only when listed as active"}


def _samples(kept, rejected, kind, ds, rej, show) -> dict:
    out = {"kept": [], "rejected": {}}
    if kind == "text":
        if kept is not None:
            out["kept"] = [{"id": i, "text": show(t, 300)} for i, t in zip(kept.column("id").to_pylist()[:3],
                                                                           kept.column("text").to_pylist()[:3])]
        if rejected is not None:
            for reason, stage, text, rid in zip(rejected.column("reject_reason").to_pylist(),
                                                rejected.column("reject_stage").to_pylist(),
                                                rejected.column("text").to_pylist(), rejected.column("id").to_pylist()):
                key = f"{stage}: {reason}"
                if len(out["rejected"].setdefault(key, [])) < 2:
                    out["rejected"][key].append({"id": rid, "text": show(text, 300)})
    elif kind == "image":
        for name, d in (("kept", ds), ("rejected", rej)):
            if d is None or not d.manifest["shards"]:
                continue
            t = d.read_shard(0, columns=["id", "image"] + (["reject_reason"] if name == "rejected" else []))
            for i in range(min(t.num_rows, 6)):
                item = {"id": t.column("id")[i].as_py(), "thumbnail": _thumb(t.column("image")[i].as_py())}
                if name == "kept":
                    out["kept"].append(item)
                else:
                    out["rejected"].setdefault(t.column("reject_reason")[i].as_py(), []).append(item)
    return out


def _thumb(data: bytes) -> str | None:
    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as im:
            im = im.convert("RGB")
            im.thumbnail((128, 128))
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=80)
        return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()
    except Exception:  # noqa: BLE001 - a corrupt image has no thumbnail; the report says so
        return None


CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#222}
h1{font-size:22px}h2{font-size:17px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}.muted{color:#777}.chart text{font-size:11px;fill:#333}
.pair{display:flex;gap:12px}.pair div{flex:1;background:#f7f7f7;padding:6px;font-size:12px;white-space:pre-wrap}
.sample{background:#f7f7f7;padding:6px;font-size:12px;white-space:pre-wrap;margin:4px 0}img{margin:3px}"""


def render(s: dict) -> str:
    e = escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>corpusforge report: {e(s['dataset'])}</title>"
             f"<style>{CSS}</style></head><body><h1>Dataset report</h1>",
             f"<p><b>{e(s['dataset'])}</b>: {s['rows']:,} {e(s['schema']['name'])} records "
             f"(schema v{e(s['schema']['version'])}) in {s['shards']} shard(s), {s['bytes']:,} bytes. "
             f"Order: {e(s['order'].get('description', s['order'].get('kind', '')))}</p>"]
    if s["sources"]:
        parts.append("<h2>Sources</h2><table><tr><th class='l'>source</th><th>rows</th><th>tokens</th></tr>" + "".join(
            f"<tr><td class='l'>{e(k)}</td><td>{v['rows']:,}</td><td>{format(v['tokens'], ',') if 'tokens' in v else ''}</td></tr>"
            for k, v in s["sources"].items()) + "</table>")
    if "funnel" in s:
        t = s["totals"]
        parts.append(f"<h2>Stage funnel</h2><p>{t['entered']:,} records entered, {t.get('created', 0):,} created, "
                     f"{t['kept']:,} kept, {t['rejected']:,} rejected (accounting "
                     f"{'checked' if t['accounting_ok'] else 'FAILED'}).</p>")
        parts.append("<table><tr><th class='l'>stage</th><th>in</th><th>kept</th><th>rejected</th>"
                     "<th class='l'>rejected by reason</th></tr>" + "".join(
                         f"<tr><td class='l'>{e(f['stage'])}</td><td>{f['in']:,}</td><td>{f['kept']:,}</td>"
                         f"<td>{f['rejected']:,}</td><td class='l'>"
                         + ", ".join(f"{e(r)} {n:,}" for r, n in sorted(f["by_reason"].items(), key=lambda kv: -kv[1]))
                         + "</td></tr>" for f in s["funnel"]) + "</table>")
        parts.append(svg.hbars([(f["stage"], f["kept"]) for f in s["funnel"]], unit=" kept"))
        parts.append("".join(f"<p><b>warning:</b> {e(w)}</p>" for w in s.get("warnings", [])))
    if s.get("distributions"):
        parts.append("<h2>Distributions (kept records)</h2>")
        for name, h in s["distributions"].items():
            if h["n"]:
                parts.append(f"<h3>{e(name)}</h3><p class='muted'>n={h['n']:,}, mean {h['mean']:.4g}, "
                             f"median {h['median']:.4g}</p>" + svg.histogram(h["edges"], h["counts"], xlabel=name))
    if s.get("languages"):
        parts.append("<h2>Languages</h2>" + svg.hbars(list(s["languages"].items())))
    if s.get("dedup"):
        d = s["dedup"]
        parts.append("<h2>Deduplication</h2>")
        if d.get("cluster_sizes"):
            parts.append(f"<p>{d['clusters']:,} near-duplicate clusters.</p>" + svg.hbars(
                [(f"size {k}", v) for k, v in sorted(d["cluster_sizes"].items())], unit=" clusters"))
        for p in d.get("examples", []):
            parts.append(f"<div class='pair'><div><b>kept</b>\n{e(p['kept'])}</div><div><b>removed</b>\n"
                         f"{e(p['removed'])}</div></div>")
        if d.get("repeated_spans"):
            r = d["repeated_spans"]
            parts.append(f"<h3>Repeated spans cut</h3><p>{r['spans_cut']:,} spans, {r['bytes_cut']:,} bytes, from "
                         f"{r['documents_with_cuts']:,} documents (first occurrences kept).</p>"
                         + svg.hbars(list(r["bytes_cut_by_source"].items()), unit=" bytes")
                         + "<table><tr><th>occurrences</th><th class='l'>span</th></tr>" + "".join(
                             f"<tr><td>{t['occurrences']}</td><td class='l'>{e(t['text'])}</td></tr>"
                             for t in r["top_spans"]) + "</table>")
    if s.get("pii"):
        p = s["pii"]
        active = ", ".join(p["active_entities"]) if p.get("active_entities") else "unknown (no text.pii stage in lineage)"
        parts.append(f"<h2>PII</h2><p>Active entity types: {e(active)}. <span class='muted'>{e(p['note'])}</span></p>"
                     + svg.hbars(list(p["replaced_by_type"].items()), unit=" replaced"))
    if s.get("mixture"):
        mx = s["mixture"]
        parts.append(f"<h2>Mixture</h2><p>Budget {mx['budget']:,} {e(mx['unit'])}.</p><table><tr><th class='l'>source"
                     "</th><th>requested</th><th>achieved</th><th>available</th><th>repeats</th></tr>" + "".join(
                         f"<tr><td class='l'>{e(n)}</td><td>{v['requested_share']:.2%}</td><td>{v['achieved_share']:.2%}"
                         f"</td><td>{v['available']:,}</td><td>{v['repeats']:.2f}x</td></tr>"
                         for n, v in mx["sources"].items()) + "</table>"
                     + "".join(f"<p class='muted'>warning: {e(w)}</p>" for w in mx.get("warnings", [])))
    if s.get("curriculum"):
        c = s["curriculum"]
        parts.append(f"<h2>Curriculum</h2><p>Difficulty ({e(str(c['score']))}) averaged over 100 consecutive "
                     f"stretches of the training order.</p>" + svg.line(c["curve"], xlabel="position in the training set",
                                                                         ylabel="difficulty"))
    sm = s.get("samples", {})
    parts.append("<h2>Samples</h2><h3>kept</h3>")
    for item in sm.get("kept", []):
        parts.append(_sample_html(item))
    for reason, items in sm.get("rejected", {}).items():
        parts.append(f"<h3>rejected: {e(reason)}</h3>" + "".join(_sample_html(i) for i in items))
    parts.append("<p class='muted'>Generated by corpusforge from _report.json beside this file.</p></body></html>")
    return "".join(parts)


def _sample_html(item: dict) -> str:
    if "thumbnail" in item:
        return (f"<img alt='{escape(item['id'])}' src='{item['thumbnail']}'>" if item["thumbnail"]
                else f"<p class='muted'>{escape(item['id'])}: not decodable</p>")
    return f"<div class='sample'><span class='muted'>{escape(item['id'][:12])}</span>\n{escape(item['text'])}</div>"


def generate(root: str | Path, out: str | Path | None = None) -> tuple[str, str]:
    """Write _report.json and _report.html into ``out`` (default: the dataset's folder, local or
    on an object store); returns their paths (URLs for an object store)."""
    summary = summarize(root)
    store = Store(out if out else root)
    html, data = store.join(REPORT_HTML), store.join(REPORT_JSON)
    store.write_json(data, summary)
    store.write_bytes(html, render(summary).encode("utf-8"))
    return store.display(html), store.display(data)
