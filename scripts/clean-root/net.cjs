// Used by scripts/npm-clean-root.sh: try to listen on a TCP port on 127.0.0.1 and say what happened
// ("network: listening", or the error code: the sandbox's seccomp filter refuses AF_INET sockets).
"use strict";
require("net")
  .createServer()
  .on("error", function (e) {
    console.log("network: " + e.code);
    process.exit(0);
  })
  .listen(0, "127.0.0.1", function () {
    console.log("network: listening");
    process.exit(0);
  });
