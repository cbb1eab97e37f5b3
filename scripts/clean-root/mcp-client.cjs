#!/usr/bin/env node
/**
 * A minimal MCP client for scripts/npm-clean-root.sh: starts the command given as its arguments (e.g.
 * `npx -y ./shellmcp-0.1.0.tgz serve --sandbox workspace-write`) with stdio pipes, then sends, each waiting for its
 * answer: `initialize`, `notifications/initialized`, `tools/list`, and one `tools/call` of `shell` whose command
 * (SHELL_COMMAND in the environment) the caller chose to show a denied rule, an escalated program and the sandbox.
 * Prints each answer as one line `<method> <json>`, then the server's stderr; exits 0 when every answer came (the
 * caller checks their content), 1 otherwise. Plain CommonJS for Node.js 12 (Debian bullseye's): no dependencies,
 * no optional chaining. Times out after CLIENT_TIMEOUT_MS (default 120000: the first `npx` installs the package).
 */
"use strict";
var childProcess = require("child_process");

// A listener on the clean root's own loopback (scripts/clean-root/net.cjs tries to reach it from the sandbox).
var listener = require("net").createServer(function (c) {
  c.end();
});
listener.listen(47621, "127.0.0.1");
listener.unref();

var argv = process.argv.slice(2);
var timeoutMs = Number(process.env.CLIENT_TIMEOUT_MS || 120000);
var server = childProcess.spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
var stderr = "";
server.stderr.on("data", function (d) {
  stderr += d.toString();
});
var pending = {};
var buffer = "";
server.stdout.on("data", function (d) {
  buffer += d.toString();
  var nl;
  while ((nl = buffer.indexOf("\n")) >= 0) {
    var line = buffer.slice(0, nl);
    buffer = buffer.slice(nl + 1);
    if (line.trim() === "") continue;
    var msg = JSON.parse(line);
    if (msg.id !== undefined && pending[msg.id]) {
      var resolve = pending[msg.id];
      delete pending[msg.id];
      resolve(msg);
    }
  }
});

var nextId = 1;
/** Send a request and resolve with its answer. */
function request(method, params) {
  var id = nextId++;
  return new Promise(function (resolve) {
    pending[id] = resolve;
    server.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: id, method: method, params: params }) + "\n");
  });
}

/** Print the server's stderr and exit with `code`. */
function finish(code) {
  process.stdout.write("--- server stderr ---\n" + stderr);
  process.exit(code);
}

var timer = setTimeout(function () {
  process.stdout.write("timed out after " + timeoutMs + " ms\n");
  server.kill("SIGKILL");
  finish(1);
}, timeoutMs);
server.on("exit", function (code, signal) {
  if (Object.keys(pending).length > 0) {
    process.stdout.write("server exited (" + (signal || code) + ") before answering\n");
    finish(1);
  }
});

var t0 = Date.now();
request("initialize", {
  protocolVersion: "2025-06-18",
  capabilities: {},
  clientInfo: { name: "clean-root-client", version: "1" },
})
  .then(function (r) {
    process.stdout.write("initialize " + JSON.stringify(r.result.serverInfo) + " (" + (Date.now() - t0) + " ms)\n");
    server.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
    return request("tools/list", {});
  })
  .then(function (r) {
    process.stdout.write(
      "tools/list " +
        JSON.stringify(
          r.result.tools.map(function (t) {
            return t.name;
          }),
        ) +
        "\n",
    );
    return request("tools/call", {
      name: "shell",
      arguments: { command: process.env.SHELL_COMMAND, workdir: process.cwd(), login: false, timeout_ms: 60000 },
    });
  })
  .then(function (r) {
    process.stdout.write("tools/call " + (r.error ? JSON.stringify(r.error) : r.result.content[0].text) + "\n");
    clearTimeout(timer);
    server.stdin.end();
    server.kill("SIGTERM");
    finish(0);
  });
