/**
 * What the MCP SDK itself costs a compiled server, v1 (`@modelcontextprotocol/sdk` 1.32, what `serve` uses) beside
 * v2 (`@modelcontextprotocol/server` 2.4.0, dual-era through `serveStdio`) and beside no SDK at all (a bare
 * line-echo JSON-RPC loop): three one-tool servers compiled as build.ts compiles shellmcp, each started `runs` times
 * (alternating) with `initialize` + `tools/list` (legacy) and with `server/discover` + `tools/list` (modern
 * envelope); ms from spawn to the second answer, and RSS 300 ms later. docs/mcp-eras.md has the figures.
 *
 *   bun bench/initialize-sdk.ts [runs]
 */
import { readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { benchDir, median, ROOT } from "./lib.ts";

const RUNS = Number(process.argv[2] ?? 21);
const dir = benchDir("shellmcp-bench-sdk-");
symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
const SOURCES: Record<string, string> = {
  "no SDK": `process.stdin.on("data", (d) => { for (const l of d.toString().split("\\n")) if (l.trim()) { const m = JSON.parse(l); if ("id" in m) process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: {} }) + "\\n"); } });`,
  "v1 SDK 1.32": `import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
const s = new Server({ name: "p", version: "0" }, { capabilities: { tools: {} } });
s.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: "shell", description: "x", inputSchema: { type: "object" } }] }));
s.setRequestHandler(CallToolRequestSchema, async () => ({ content: [{ type: "text", text: "hi" }] }));
void s.connect(new StdioServerTransport());`,
  "v2 SDK 2.4.0": `import { Server } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
serveStdio(() => {
  const s = new Server({ name: "p", version: "0" }, { capabilities: { tools: {} } });
  s.setRequestHandler("tools/list", async () => ({ tools: [{ name: "shell", description: "x", inputSchema: { type: "object" } }] }));
  s.setRequestHandler("tools/call", async () => ({ content: [{ type: "text", text: "hi" }] }));
  return s;
});`,
};
const exes: Record<string, string> = {};
for (const [name, src] of Object.entries(SOURCES)) {
  const file = join(dir, `${name.replace(/\W+/g, "-")}.ts`);
  writeFileSync(file, src);
  const out = file.replace(/\.ts$/, "");
  const flags = ["--compile", "--bytecode", "--minify-syntax", "--minify-whitespace"];
  const r = Bun.spawnSync([process.execPath, "build", ...flags, file, "--outfile", out], { cwd: dir, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`${name}: ${r.stderr.toString()}`);
  const js = Bun.spawnSync([process.execPath, "build", "--target=bun", "--minify-syntax", "--minify-whitespace", file], {
    cwd: dir,
    stdout: "pipe",
  });
  console.log(`${name.padEnd(14)} bundle ${(js.stdout.byteLength / 1024).toFixed(0)} KiB`);
  exes[name] = out;
}

const line = (id: number, method: string, params: unknown) => JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n";
const META = { _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } };
const INPUTS: Record<string, string> = {
  legacy:
    line(1, "initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "b", version: "0" } }) +
    JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) +
    "\n" +
    line(2, "tools/list", {}),
  modern: line(1, "server/discover", META) + line(2, "tools/list", META),
};

async function once(exe: string, input: string): Promise<{ ms: number; rss: number }> {
  const t0 = Bun.nanoseconds();
  const p = Bun.spawn([exe], { stdin: "pipe", stdout: "pipe", stderr: "ignore" });
  await p.stdin.write(input);
  await p.stdin.flush();
  const reader = p.stdout.getReader();
  let text = "";
  while (text.split("\n").length < 3) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  const ms = (Bun.nanoseconds() - t0) / 1e6;
  await Bun.sleep(300);
  const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p.pid}/status`, "utf8"))![1]) / 1024;
  p.kill();
  await p.exited;
  return { ms, rss };
}

for (const [era, input] of Object.entries(INPUTS)) {
  const ms: Record<string, number[]> = {};
  const rss: Record<string, number[]> = {};
  for (let i = 0; i < RUNS; i++)
    for (const [name, exe] of Object.entries(exes)) {
      const r = await once(exe, input);
      (ms[name] ??= []).push(r.ms);
      (rss[name] ??= []).push(r.rss);
    }
  for (const name of Object.keys(exes))
    console.log(
      `${era.padEnd(7)} ${name.padEnd(14)} ready ${median(ms[name]!).toFixed(1).padStart(6)} ms   RSS ${median(rss[name]!).toFixed(1)} MiB`,
    );
}
