// Bundles the extension with esbuild (vscode-languageclient inside, `vscode` external).
//
//   node scripts/build-extension.mjs               extension/dist/{extension,panel}.js
//   node scripts/build-extension.mjs --production  the same, minified, no sourcemaps
//   node scripts/build-extension.mjs --tests       out/unit/*.test.js for `node --test`
//
// The unit tests cover the modules that do not import `vscode`; bundling each test
// file makes an accidental `vscode` import fail loudly (it is external and absent).
import * as esbuild from "esbuild";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const args = new Set(process.argv.slice(2));
const production = args.has("--production");

const common = {
  bundle: true,
  logLevel: "warning",
  sourcemap: production ? false : "linked",
  minify: production,
  target: "es2022",
};

if (args.has("--tests")) {
  const testDir = join(root, "extension", "test");
  const entryPoints = readdirSync(testDir)
    .filter((f) => f.endsWith(".test.ts"))
    .map((f) => join(testDir, f));
  await esbuild.build({
    ...common,
    sourcemap: "inline",
    entryPoints,
    outdir: join(root, "out", "unit"),
    platform: "node",
    format: "cjs",
    external: ["vscode"],
  });
} else {
  await Promise.all([
    esbuild.build({
      ...common,
      entryPoints: [join(root, "extension", "src", "extension.ts")],
      outfile: join(root, "extension", "dist", "extension.js"),
      platform: "node",
      format: "cjs",
      external: ["vscode"],
    }),
    // The results panel's script runs inside the webview (a browser), loaded by URI
    // so the panel's CSP can forbid inline code.
    esbuild.build({
      ...common,
      entryPoints: [join(root, "extension", "src", "panel", "webview.ts")],
      outfile: join(root, "extension", "dist", "panel.js"),
      platform: "browser",
      format: "iife",
    }),
  ]);
}
