#!/usr/bin/env node
// The npm launcher of llm-judge: runs the native binary of this platform's package
// (`<this package>-<os>-<cpu>`, an optional dependency chosen by its `os` and `cpu`),
// with the same arguments, stdin, stdout and stderr; forwards SIGINT, SIGTERM and
// SIGHUP to it and ends as it ended (its exit code, or the same signal). Plain Node.js,
// no dependencies. Built into a package by scripts/build-npm.sh (docs/install.md).
"use strict";

const { spawn } = require("child_process");
const path = require("path");
const os = require("os");

const launcher = require("../package.json").name;
const platformPackage = `${launcher}-${process.platform}-${process.arch}`;
const supported = Object.keys(require("../package.json").optionalDependencies || {});

function fail(message) {
  process.stderr.write(`llm-judge: ${message}\n`);
  process.exit(1);
}

function binaryPath() {
  if (!supported.includes(platformPackage)) {
    fail(
      `no llm-judge binary is built for ${process.platform} ${process.arch} ` +
        `(there are: ${supported.map((p) => p.slice(launcher.length + 1)).join(", ")}).`
    );
  }
  let manifest;
  try {
    manifest = require.resolve(`${platformPackage}/package.json`);
  } catch (_) {
    fail(
      `the package ${platformPackage}, which holds the binary for this platform, is not ` +
        `installed. npm leaves optional dependencies out without a word when told to ` +
        `(--omit=optional, --no-optional, omit=optional in .npmrc) or when it installs ` +
        `offline without them in its cache. Reinstall with them:\n` +
        `  npm i -g ${launcher}\n` +
        `or install the same binary from PyPI: uv tool install llm-judge (or pipx install llm-judge).`
    );
  }
  return path.join(path.dirname(manifest), "bin", "llm-judge");
}

const binary = binaryPath();
const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });

const forwarded = ["SIGINT", "SIGTERM", "SIGHUP"];
const forward = (signal) => {
  if (child.exitCode === null && child.signalCode === null) {
    try {
      child.kill(signal);
    } catch (_) {
      // Already gone: its exit ends this process.
    }
  }
};
for (const signal of forwarded) {
  process.on(signal, forward);
}

child.on("error", (err) => {
  fail(`cannot run ${binary}: ${err.message}; reinstall: npm i -g ${launcher}`);
});

child.on("exit", (code, signal) => {
  if (signal) {
    // End by the same signal, so a caller sees what the binary saw.
    for (const s of forwarded) {
      process.removeAllListeners(s);
    }
    try {
      process.kill(process.pid, signal);
    } catch (_) {
      // Fall through to the shell's convention below.
    }
    process.exit(128 + (os.constants.signals[signal] || 0));
  }
  process.exit(code === null ? 1 : code);
});
