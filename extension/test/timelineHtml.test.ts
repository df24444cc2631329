// node --test: the timeline panel's pure parts (page template, arguments, reveal).
import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fillPage, revealTarget, timelineArgs } from "../src/timelineHtml";

const template = readFileSync(
  join(__dirname, "..", "..", "extension", "media", "timeline", "index.html"),
  "utf8",
);

test("the page allows only its own nonce'd scripts and the webview's own styles", () => {
  const html = fillPage(template, {
    cspSource: "vscode-webview://abc",
    nonce: "N0nce",
    base: "https://file+.vscode-resource/x/timeline/",
  });
  const csp = /Content-Security-Policy"\s+content="([^"]+)"/.exec(html)?.[1] ?? "";
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'nonce-N0nce'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:\/\/(?!file)/);
  assert.doesNotMatch(html, /\{\{/);
  const scripts = [...html.matchAll(/<script ([^>]*)>/g)].map((m) => m[1]);
  assert.equal(scripts.length, 3);
  for (const s of scripts) {
    assert.match(s, /nonce="N0nce"/);
    assert.match(s, /src="https:\/\/file\+\.vscode-resource\/x\/timeline\/(model|view|main)\.js"/);
  }
  assert.doesNotMatch(html, /<script nonce="N0nce">/); // no inline script
});

test("the command takes {uri, line} from a link, else the cursor", () => {
  const cursor = { uri: "file:///w/a.py", line: 7 };
  assert.deepEqual(timelineArgs({ uri: "file:///w/b.py", line: 21 }, cursor), {
    uri: "file:///w/b.py",
    line: 21,
  });
  assert.deepEqual(timelineArgs([{ uri: "file:///w/b.py", line: 3 }], cursor), {
    uri: "file:///w/b.py",
    line: 3,
  });
  assert.deepEqual(timelineArgs(undefined, cursor), cursor);
  assert.equal(timelineArgs(undefined, undefined), undefined);
  assert.deepEqual(timelineArgs({ uri: "file:///w/b.py", line: -2 }, cursor), {
    uri: "file:///w/b.py",
    line: 0,
  });
});

test("a click reveals where the server says the line is now, else the run's line", () => {
  const data = {
    sources: [["a.py", 22]] as [string, number][],
    targets: [{ uri: "file:///w/a.py", line: 30 }],
  };
  assert.deepEqual(revealTarget(data, { type: "reveal", src: 0, file: "a.py", line: 22 }), {
    uri: "file:///w/a.py",
    line: 30,
  });
  assert.deepEqual(revealTarget({ targets: [null] }, { type: "reveal", src: 0, file: "b.py", line: 5 }), {
    file: "b.py",
    line: 4,
  });
  assert.equal(revealTarget(data, { type: "reveal" }), undefined);
});
