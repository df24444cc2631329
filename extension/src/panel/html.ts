// The results panel's HTML (pure: a string from the run data). Strict CSP: nothing
// remote, no inline script; the one script is the bundled panel.js, allowed by nonce.
import {
  RunData,
  clockLabel,
  columnTitle,
  formatCell,
  genericTable,
  hasBackward,
  lineTime,
  noisyFinding,
  rankRows,
  reconciledText,
  sortedFindings,
  sortedLines,
  sortedOps,
  unitOf,
} from "./format";
import { Shown, count, share, shownText, timeUs } from "./figures";
import { rooflineSection } from "./roofline";

export interface PageAssets {
  cspSource: string; // webview.cspSource
  nonce: string;
  scriptUri: string;
  styleUri: string;
}

export function escapeHtml(text: unknown): string {
  return String(text ?? "")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

export function contentSecurityPolicy(a: PageAssets): string {
  return [
    "default-src 'none'",
    `style-src ${a.cspSource}`,
    `script-src 'nonce-${a.nonce}'`,
    `img-src ${a.cspSource} data:`,
    `font-src ${a.cspSource}`,
  ].join("; ");
}

/** A nonce for one page load: 32 characters from a CSPRNG. */
export function makeNonce(random: (n: number) => Uint8Array): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  return Array.from(random(32), (b) => alphabet[b % alphabet.length]).join("");
}

function revealAttrs(file: string, line: number): string {
  return `class="reveal" tabindex="0" data-file="${escapeHtml(file)}" data-line="${escapeHtml(line)}"`;
}

function table(id: string, head: string[], rows: string[]): string {
  const th = head.map((h) => `<th>${escapeHtml(h)}</th>`).join("");
  return `<table id="${id}"><thead><tr>${th}</tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

export function renderBody(data: RunData): string {
  const r = data.result;
  if (!r)
    return `<p class="empty">No run yet for this file. Right-click a marked function → <b>Profile on Trainium</b>.</p>`;
  const total = r.totals.self_time_us;
  const parts: string[] = [];
  parts.push(
    `<header><h1>${escapeHtml(r.function.name)} <span class="muted">${escapeHtml(r.function.file)}:${r.function.line}</span></h1>` +
      `<p><b>${escapeHtml(shownText(r.totals, "self_time_us", timeUs))}</b> ${escapeHtml(clockLabel(r.clock))} per ${unitOf(r)}` +
      (r.totals.wall_us_median
        ? ` · wall ${escapeHtml(shownText(r.totals, "wall_us_median", timeUs))} (unprofiled median)`
        : "") +
      (r.totals.steps ? ` · ${escapeHtml(shownText(r.totals, "steps", count))} measured steps` : "") +
      ` · backend <b>${escapeHtml(r.backend)}</b> on <b>${escapeHtml(r.host)}</b>` +
      ` · <span class="muted">run ${escapeHtml(r.run_id)}</span></p>` +
      (reconciledText(r) ? `<p id="reconciled">profiled ${escapeHtml(reconciledText(r))}</p>` : "") +
      `</header>`,
  );
  if (data.mostly_fit)
    parts.push(`<p id="mostly-fit" class="unreliable">⚠ ${escapeHtml(data.mostly_fit)}</p>`);
  const noisy = noisyFinding(r);
  if (noisy)
    parts.push(
      `<p id="unreliable" class="unreliable">⚠ Unreliable figures: ${escapeHtml(noisy.message)}</p>`,
    );

  const findings = sortedFindings(r);
  if (findings.length) {
    const rows = findings.map(
      (f) =>
        `<tr ${revealAttrs(f.file, f.line)}><td class="sev ${escapeHtml(f.severity)}">${escapeHtml(f.severity)}</td>` +
        `<td>${escapeHtml(f.file)}:${f.line}</td><td>${escapeHtml(f.message)}` +
        (f.fix ? `<div class="muted">${escapeHtml(f.fix)}</div>` : "") +
        `</td></tr>`,
    );
    parts.push(`<h2>Findings</h2>` + table("findings", ["", "line", "finding"], rows));
  }

  const train = hasBackward(r);
  if (train) {
    const t = r.totals;
    parts.push(
      `<p>forward <b>${escapeHtml(shownText(t, "forward_time_us", timeUs))}</b> · backward <b>${escapeHtml(shownText(t, "backward_time_us", timeUs))}</b>` +
        ` · optimizer <b>${escapeHtml(shownText(t, "optimizer_time_us", timeUs))}</b>` +
        (t.recompute_time_us ? ` · recompute ${escapeHtml(shownText(t, "recompute_time_us", timeUs))}` : "") +
        `</p>`,
    );
  }
  const lines = sortedLines(r);
  const lineRows = lines.map(
    (l) =>
      `<tr ${revealAttrs(l.file, l.line)}><td class="num">${l.line}</td>` +
      `<td class="num">${escapeHtml(shownText(l, "self_time_us", timeUs))}</td>` +
      (train
        ? `<td class="num">${escapeHtml(l.backward_self_time_us ? shownText(l, "backward_self_time_us", timeUs) : "–")}</td>` +
          `<td class="muted">${escapeHtml(Array.from(new Set((l.backward_ops ?? []).map((o) => o.name))).join(", "))}</td>`
        : "") +
      `<td class="num">${escapeHtml(share(lineTime(l), total))}</td>` +
      `<td class="num">${escapeHtml(shownText(l, "calls", count))}</td>` +
      `<td class="num">${escapeHtml(l.self_time_us_min !== undefined && l.self_time_us_max !== undefined ? `${shownText(l, "self_time_us_min", timeUs)} – ${shownText(l, "self_time_us_max", timeUs)}` : "–")}</td>` +
      `<td><code>${escapeHtml((l.text ?? "").trim())}</code></td>` +
      `<td class="muted">${escapeHtml((l.ops ?? []).map((o) => o.name).join(", "))}</td></tr>`,
  );
  parts.push(
    `<h2>Lines <span class="muted">by self time${train ? " (forward + backward)" : ""}</span></h2>` +
      table(
        "lines",
        train
          ? ["line", "fwd", "bwd", "backward ops", "share", "ops/call", "spread", "source", "ops"]
          : ["line", "self", "share", "ops/call", "spread", "source", "ops"],
        lineRows,
      ),
  );
  if (r.unattributed_us)
    parts.push(`<p class="muted">Unattributed: ${escapeHtml(shownText(r, "unattributed_us", timeUs))}</p>`);
  const roofline = rooflineSection(data.roofline, clockLabel(r.clock), escapeHtml);
  if (roofline) parts.push(roofline);

  const ranks = rankRows(r);
  if (ranks.rows.length) {
    const rows = ranks.rows.map(
      (k) =>
        `<tr${k.rank === ranks.slowest ? ' class="slowest"' : ""}>` +
        (ranks.nodes
          ? `<td>${escapeHtml(k.node ?? "")}</td><td class="num">${escapeHtml(k.node_rank ?? "")}</td>` +
            `<td class="num">${escapeHtml(k.local_rank ?? "")}</td>`
          : "") +
        `<td class="num">${k.rank}</td>` +
        `<td class="num">${escapeHtml(shownText(k, "self_time_us", timeUs))}</td>` +
        `<td class="num">${escapeHtml(timeUs(k.self_time_us - (k.collective_us ?? 0)))}</td>` +
        `<td class="num">${escapeHtml(k.wait_us !== undefined ? shownText(k, "wait_us", timeUs) : "–")}</td>` +
        `<td class="num">${escapeHtml(k.wall_us_median != null ? shownText(k, "wall_us_median", timeUs) : "–")}</td></tr>`,
    );
    parts.push(
      `<h2>Ranks <span class="muted">${ranks.rows.length} ranks; lines above show the median rank` +
        `${ranks.nodes ? `, on ${new Set(ranks.rows.map((k) => k.node)).size} nodes` : ""}</span></h2>` +
        table(
          "ranks",
          [...(ranks.nodes ? ["node", "node rank", "local"] : []), "rank", "self", "compute", "wait", "wall"],
          rows,
        ),
    );
  }

  const opRows = sortedOps(r).map(
    (o) =>
      `<tr><td><code>${escapeHtml(o.name)}</code></td><td class="num">${escapeHtml(shownText(o, "calls", count))}</td>` +
      `<td class="num">${escapeHtml(shownText(o, "self_time_us", timeUs))}</td><td class="num">${escapeHtml(share(o.self_time_us, total))}</td>` +
      `<td class="num">${escapeHtml(shownText(o, "total_time_us", timeUs))}</td></tr>`,
  );
  parts.push(
    `<h2>Ops <span class="muted">by self time</span></h2>` +
      table("ops", ["op", "calls", "self", "share", "total"], opRows),
  );

  for (const [id, title, doc] of [
    ["comparison", "Variants", data.comparison],
    ["diff", "Against the previous run", data.diff],
  ] as const) {
    const t = genericTable(doc);
    if (!t) continue;
    const rows = t.rows.map((row) => {
      const cells = t.columns
        .map((c) => `<td>${escapeHtml(formatCell(c, row[c], row as Shown))}</td>`)
        .join("");
      const line =
        typeof row.line === "number"
          ? row.line
          : typeof row.after_line === "number"
            ? row.after_line
            : undefined;
      const file = typeof row.file === "string" ? row.file : r.function.file;
      return line !== undefined ? `<tr ${revealAttrs(file, line)}>${cells}</tr>` : `<tr>${cells}</tr>`;
    });
    parts.push(`<h2>${title}</h2>` + table(id, t.columns.map(columnTitle), rows));
  }
  return parts.join("\n");
}

export function renderPage(data: RunData, assets: PageAssets): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${escapeHtml(contentSecurityPolicy(assets))}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${escapeHtml(assets.styleUri)}">
<title>Trainium Lens</title>
</head>
<body>
${renderBody(data)}
<script nonce="${escapeHtml(assets.nonce)}" src="${escapeHtml(assets.scriptUri)}"></script>
</body>
</html>`;
}
