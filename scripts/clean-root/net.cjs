// Used by scripts/npm-clean-root.sh: try to reach the TCP listener mcp-client.cjs keeps on the clean root's
// 127.0.0.1:47621 and say what happened ("network: connected", or the error code). A sandbox without network
// cannot: Landlock's seccomp filter refuses the socket (EPERM/EACCES); under bubblewrap the command is in its
// server's private loopback network, where nothing listens on that port (ECONNREFUSED).
"use strict";
var s = require("net").connect(47621, "127.0.0.1");
s.on("connect", function () {
  console.log("network: connected");
  process.exit(0);
});
s.on("error", function (e) {
  console.log("network: " + e.code);
  process.exit(0);
});
