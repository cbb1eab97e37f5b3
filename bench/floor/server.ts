/**
 * The floor of any Bun + MCP SDK v1 stdio server (bench/floor.ts): one `shell` tool that runs `bash -c CMD` directly —
 * no sandbox, no exec interception, no cgroup, no lifeline guard, no git guard — and answers with the output. What
 * it costs is what the fixed choices (Bun, `@modelcontextprotocol/sdk` v1's `Server`) cost before any of shellmcp's
 * own work. `FLOOR_WORKER=1` also starts one empty Worker (shellmcp's escalation worker is one).
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const server = new Server({ name: "floor", version: "0" }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [{ name: "shell", inputSchema: { type: "object" } }] }));
// Synchronous: the least a call can cost (no concurrency is measured; an async spawn's pipes cost more, and Bun's
// `Response(p.stdout).text()` beside `p.exited` was seen to hang here now and then).
server.setRequestHandler(CallToolRequestSchema, (req) => {
  const a = req.params.arguments as { command: string; workdir?: string };
  const p = Bun.spawnSync(["/bin/bash", "-c", a.command], { cwd: a.workdir, stdout: "pipe", stderr: "pipe" });
  const output = p.stdout.toString() + p.stderr.toString();
  return { content: [{ type: "text", text: JSON.stringify({ exit_code: p.exitCode, output }) }] };
});
await server.connect(new StdioServerTransport());
// Compiled, the worker is the embedded entrypoint `worker.js` beside this one (as src/self.ts `workerUrl` finds it).
if (process.env.FLOOR_WORKER === "1") new Worker("/$bunfs/root/worker.js");
// Idle: give back what start-up left, as shellmcp serve does once idle (src/serve.ts).
setTimeout(() => {
  Bun.gc(true);
  Bun.shrink();
}, 3000);
