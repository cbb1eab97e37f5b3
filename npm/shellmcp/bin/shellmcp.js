#!/usr/bin/env node
/**
 * shellmcp's npm launcher: runs the `shellmcp` executable of this platform's package, `@shellmcp/<os>-<cpu>`,
 * which npm installed as an optional dependency selected by its `os`/`cpu` fields (the shape of esbuild and
 * @openai/codex). Arguments, stdio (the MCP channel), the exit status and SIGINT/SIGTERM/SIGHUP pass through.
 * Plain CommonJS for any Node.js from 12 on (Debian bullseye's). SHELLMCP_BINARY overrides the executable.
 */
"use strict";
var childProcess = require("child_process");
var fs = require("fs");
var path = require("path");

/** Our platform packages, by `process.platform-process.arch`. */
var PACKAGES = {
  "linux-x64": "@shellmcp/linux-x64",
  "linux-arm64": "@shellmcp/linux-arm64",
  "darwin-x64": "@shellmcp/darwin-x64",
  "darwin-arm64": "@shellmcp/darwin-arm64",
};

/** Print `message` as shellmcp's and exit 1. */
function fail(message) {
  process.stderr.write("shellmcp: " + message + "\n");
  process.exit(1);
}

/** Path of the executable to run. */
function binaryPath() {
  if (process.env.SHELLMCP_BINARY) return process.env.SHELLMCP_BINARY;
  var key = process.platform + "-" + process.arch;
  var pkg = PACKAGES[key];
  if (!pkg) fail("no build for " + key + " (there are builds for " + Object.keys(PACKAGES).join(", ") + ")");
  try {
    return require.resolve(pkg + "/bin/shellmcp");
  } catch (e) {
    return fail(
      "the package " +
        pkg +
        " (the executable for " +
        key +
        ") is not installed: npm skipped this optional " +
        "dependency. Install again without --no-optional / --omit=optional, or download the release tarball.",
    );
  }
}

/**
 * macOS: the executable carries no shells (they are built on a Mac). Say how to get them before `serve` starts
 * without them: no --shell/--bash and no SHELLMCP_SHELLS_DIR holding the shell.
 */
function checkMacShells(args) {
  if (process.platform !== "darwin" || args[0] !== "serve") return;
  for (var i = 1; i < args.length; i++) {
    if (/^--(shell|bash)(=|$)/.test(args[i])) return;
  }
  var dir = process.env.SHELLMCP_SHELLS_DIR;
  if (dir && fs.existsSync(path.join(dir, "bash"))) return;
  fail(
    "the patched shells are missing. On macOS they are built on your Mac, once: in a clone of shellmcp's repository run\n" +
      "    bash scripts/build-shells-macos.sh\n" +
      "(needs the Xcode command line tools and autoconf), then start the server with\n" +
      "    SHELLMCP_SHELLS_DIR=<clone>/dist/shells npx -y shellmcp serve\n" +
      '(in an MCP client\'s config: "env": { "SHELLMCP_SHELLS_DIR": "<clone>/dist/shells" }), or pass --shell <clone>/dist/shells/bash.',
  );
}

var args = process.argv.slice(2);
checkMacShells(args);
var child = childProcess.spawn(binaryPath(), args, { stdio: "inherit" });
["SIGINT", "SIGTERM", "SIGHUP"].forEach(function (sig) {
  process.on(sig, function () {
    child.kill(sig);
  });
});
child.on("error", function (e) {
  fail("cannot start " + e.path + ": " + e.message);
});
child.on("exit", function (code, signal) {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code === null ? 1 : code);
  }
});
