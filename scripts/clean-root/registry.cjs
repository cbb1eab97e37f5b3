#!/usr/bin/env node
/**
 * A read-only npm registry on 127.0.0.1 for scripts/npm-clean-root.sh, serving the platform packages of
 * dist/release/ (`@shellmcp/<target>`), so that `npx -y ./shellmcp-<version>.tgz` resolves the launcher's
 * optionalDependencies the way it will from the public registry: npm reads each packument, skips the targets whose
 * `os`/`cpu` do not match, and downloads the one that does. Everything else is 404. Prints the port, then serves
 * until killed. Usage: node registry.cjs DIST_RELEASE_DIR VERSION
 */
"use strict";
var crypto = require("crypto");
var fs = require("fs");
var http = require("http");
var path = require("path");

var dir = process.argv[2];
var version = process.argv[3];
var TARGETS = {
  "linux-x64": ["linux", "x64"],
  "linux-arm64": ["linux", "arm64"],
  "darwin-x64": ["darwin", "x64"],
  "darwin-arm64": ["darwin", "arm64"],
};
var port = 0;

/** The packument of @shellmcp/<target>, with the tarball's integrity when dist/release has it. */
function packument(target) {
  var file = "shellmcp-" + target + "-" + version + ".tgz";
  var dist = { tarball: "http://127.0.0.1:" + port + "/tarballs/" + file };
  var full = path.join(dir, file);
  if (fs.existsSync(full)) {
    var bytes = fs.readFileSync(full);
    dist.integrity = "sha512-" + crypto.createHash("sha512").update(bytes).digest("base64");
    dist.shasum = crypto.createHash("sha1").update(bytes).digest("hex");
  }
  var name = "@shellmcp/" + target;
  var v = { name: name, version: version, os: [TARGETS[target][0]], cpu: [TARGETS[target][1]], dist: dist };
  var versions = {};
  versions[version] = v;
  return { name: name, "dist-tags": { latest: version }, versions: versions };
}

var server = http.createServer(function (req, res) {
  var url = decodeURIComponent(req.url.split("?")[0]);
  var m = /^\/@shellmcp\/([a-z0-9-]+)$/.exec(url);
  if (m && TARGETS[m[1]]) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(packument(m[1])));
    return;
  }
  var t = /^\/tarballs\/(shellmcp-[a-z0-9-]+-[0-9.]+\.tgz)$/.exec(url);
  if (t && fs.existsSync(path.join(dir, t[1]))) {
    res.writeHead(200, { "content-type": "application/octet-stream" });
    fs.createReadStream(path.join(dir, t[1])).pipe(res);
    return;
  }
  res.writeHead(404, { "content-type": "application/json" });
  res.end('{"error":"not found"}');
});
server.listen(0, "127.0.0.1", function () {
  port = server.address().port;
  process.stdout.write(port + "\n");
});
