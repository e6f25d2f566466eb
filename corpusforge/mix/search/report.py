"""The mixture search's HTML report (offline, inline SVG): the choice and its verification, how
well each regression predicted held-out proxies, the loss landscape per source, every proxy.
Every number comes from ``search.json``."""

from __future__ import annotations

from html import escape as e

from corpusforge.report import svg
from corpusforge.report.build import CSS


def _f(v, fmt: str = "{:.4f}") -> str:
    return fmt.format(v) if isinstance(v, (int, float)) else "-"


def render(r: dict) -> str:
    names = list(r["sources"])
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>mixture search: {e(r['name'])}</title>"
             f"<style>{CSS}</style></head><body><h1>Mixture search: {e(r['name'])}</h1>"]
    parts.append("<p>Target: " + ", ".join(f"{e(n)} (weight {t['weight']:g}, {t['tokens']:,} tokens)"
                                          for n, t in r["targets"].items())
                 + f". {len(r['proxies'])} proxies, {r['wall_seconds']:.0f} s.</p>")
    head = "".join(f"<th>{e(n)}</th>" for n in names)
    parts.append(f"<h2>Chosen mixture</h2><table><tr><th class='l'></th>{head}<th>target loss</th></tr>"
                 f"<tr><td class='l'><b>chosen</b> (predicted)</td>"
                 + "".join(f"<td>{r['chosen'][n]:.3f}</td>" for n in names) + f"<td>{r['predicted_loss']:.4f}</td></tr>"
                 f"<tr><td class='l'>cap (max_epochs x tokens / budget)</td>"
                 + "".join(f"<td>{r['sources'][n]['cap']:.3f}</td>" for n in names) + "<td></td></tr></table>"
                 f"<p>Mix config: <code>{e(r['mix_config'])}</code> (<code>corpusforge mix</code> takes it as it is).</p>")
    v = r.get("verification")
    if v:
        parts.append("<h2>Verification at twice the proxy's depth</h2><table><tr><th class='l'>mixture</th>"
                     + head + "<th>target loss (mean over seeds)</th><th>seed spread</th></tr>" + "".join(
                         f"<tr><td class='l'>{e(k)}</td>" + "".join(f"<td>{m['weights'][n]:.3f}</td>" for n in names)
                         + f"<td>{_f(m['mean'])}</td><td>{_f(m['spread'])}</td></tr>" for k, m in v["mixtures"].items())
                     + f"</table><p><b>{e(v['summary'])}</b>. "
                     + ("The chosen mixture wins by more than the seed-to-seed spread." if v["beyond_seed_spread"]
                        else "The win is not larger than the seed-to-seed spread: treat the choice as a tie.")
                     + "</p>")
    fit = r["fit"]
    parts.append("<h2>Regression: how well it predicts proxies it did not see</h2>"
                 f"<p>{fit['cv_best']['folds']}-fold cross-validation over {len(fit['cv_ids'])} proxies; the search "
                 f"uses <b>{e(fit['model'])}</b> (best rank correlation).</p><table><tr><th class='l'>model</th>"
                 "<th>Spearman (held-out)</th><th>RMSE</th><th>MAE</th></tr>" + "".join(
                     f"<tr><td class='l'>{e(s['model'])}</td><td>{s['spearman']:.3f}</td><td>{s['rmse']:.4f}</td>"
                     f"<td>{s['mae']:.4f}</td></tr>" for s in fit["cv"]) + "</table>")
    measured = {p["id"]: p for p in r["proxies"] if "error" not in p}
    parts.append("<h2>Loss landscape per source</h2><p class='muted'>Dots: proxies (target loss against the "
                 "source's share). Line: the regression's prediction along that share, the other sources keeping "
                 "their proportions in the chosen mixture. Squares: chosen and baselines.</p><div class='pair'>")
    for n in names:
        pts = [(p["weights"][n], p["target_loss"]) for p in measured.values()]
        curve = list(zip(fit["landscape"][n]["share"], fit["landscape"][n]["predicted_loss"]))
        marks = [(r["chosen"][n], r["predicted_loss"], "chosen")]
        marks += [(p["weights"][n], p["target_loss"], p["id"]) for p in measured.values() if p["kind"] == "baseline"]
        parts.append(f"<div><b>{e(n)}</b><br>" + svg.scatter(pts, curve=curve, marks=marks, xlabel=f"share of {n}",
                                                            ylabel="target loss") + "</div>")
    parts.append("</div>")
    tnames = list(r["targets"])
    parts.append("<h2>Proxies</h2><table><tr><th class='l'>proxy</th><th class='l'>kind</th>" + head
                 + "".join(f"<th>loss {e(t)}</th>" for t in tnames) + "<th>target loss</th><th>s</th></tr>")
    for p in sorted(r["proxies"], key=lambda p: p.get("target_loss", float("inf"))):
        if "error" in p:
            parts.append(f"<tr><td class='l'>{e(p['id'])}</td><td class='l'>failed</td>"
                         f"<td class='l' colspan='{len(names) + len(tnames) + 2}'>{e(p['error'])}</td></tr>")
            continue
        parts.append(f"<tr><td class='l'>{e(p['id'])}</td><td class='l'>{e(p['kind'])}</td>"
                     + "".join(f"<td>{p['weights'][n]:.3f}</td>" for n in names)
                     + "".join(f"<td>{p['target_losses'][t]:.4f}</td>" for t in tnames)
                     + f"<td><b>{p['target_loss']:.4f}</b></td><td>{p['wall_seconds']:.1f}</td></tr>")
    parts.append("</table></body></html>")
    return "".join(parts)
