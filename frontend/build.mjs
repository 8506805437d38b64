// Bundles the page into ember/ui/static (no CDN: the page works offline) and records
// a fingerprint of its sources there, which a test compares to catch a stale bundle.
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const out = "../ember/ui/static";
export const SOURCES = ["build.mjs", "index.html", "package-lock.json", "package.json", "tsconfig.json"];

function sources() {
  const src = readdirSync("src").sort().map((f) => join("src", f));
  return [...SOURCES, ...src].sort();
}

function fingerprint() {
  const hash = createHash("sha256");
  for (const file of sources()) {
    hash.update(file + "\0");
    hash.update(readFileSync(file));
    hash.update("\0");
  }
  return hash.digest("hex");
}

mkdirSync(out, { recursive: true });
await build({
  entryPoints: ["src/main.ts", "src/style.css"],
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2020",
  outdir: out,
  entryNames: "app",
  legalComments: "linked",
  logLevel: "warning",
}).catch(() => process.exit(1));
copyFileSync("index.html", join(out, "index.html"));
writeFileSync(join(out, "build.json"), JSON.stringify({ sources: sources(), sha256: fingerprint() }, null, 1) + "\n");
