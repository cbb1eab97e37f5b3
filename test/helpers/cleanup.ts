/**
 * Preloaded by `bun test` (bunfig.toml): the run's folders (test-dirs.ts) are made on load and removed after the
 * last test, and the run must leave the machine as it found it (issue 20).
 *
 * Leftover check: on load it lists what is in `/tmp`, `/var/tmp`, `$TMPDIR` (as the run found it) and `$HOME`
 * (two levels, so `~/.cache/<tool>` counts); after the run, anything new there is a leftover. Under `CI=true` (or
 * `SHELLMCP_CHECK_LEFTOVERS=1`) a leftover fails the run, as a failed `(unnamed)` hook naming every path; elsewhere
 * it is a warning, because on a developer's machine other programs write to `/tmp` too. scripts/test.sh gives the
 * run a new HOME and TMPDIR, so there every entry is the run's own. `SHELLMCP_CHECK_ALSO` adds folders to watch two
 * levels deep, `SHELLMCP_CHECK_TMP` one level (colon-separated: test.sh passes the HOME and the TMPDIR it replaced).
 */
import { afterAll } from "bun:test";
import { readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { STRICT_PREREQS } from "./prereq.ts";
import { CONF_BASE, ORIGINAL_TMPDIR, RUN_TMP } from "./test-dirs.ts";

export { CONF_BASE, RUN_TMP } from "./test-dirs.ts";

/** Folders watched for leftovers, and how many levels below each are listed. */
const WATCHED: [string, number][] = [
  ["/tmp", 1],
  ["/var/tmp", 1],
  [ORIGINAL_TMPDIR, 1],
  [homedir(), 2],
  ...(process.env.SHELLMCP_CHECK_ALSO ?? "")
    .split(":")
    .filter((d) => d !== "")
    .map((d): [string, number] => [d, 2]),
  ...(process.env.SHELLMCP_CHECK_TMP ?? "")
    .split(":")
    .filter((d) => d !== "")
    .map((d): [string, number] => [d, 1]),
];

/** Every path up to `depth` levels below `dir` (none when it cannot be read). */
function listing(dir: string, depth: number): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const n of names) {
    const p = join(dir, n);
    out.push(p);
    if (depth > 1) {
      try {
        if (statSync(p).isDirectory()) out.push(...listing(p, depth - 1));
      } catch {
        // vanished or unreadable: what it held is not ours to judge
      }
    }
  }
  return out;
}

function snapshot(): Set<string> {
  return new Set(WATCHED.flatMap(([d, depth]) => listing(d, depth)));
}

const before = snapshot();

/** The run's own folders, removed before the comparison. */
const OWN = [CONF_BASE, RUN_TMP];

/**
 * The folder of the programs the executable carries, in this run's HOME: where a user other than root without
 * /run/user/<uid> keeps them (src/carried/portable-shells.ts), as root keeps them in /run/shellmcp (unwatched). Every
 * `serve` a test starts with this HOME fills it, as any start does: not a leftover (with `.cache` when it holds only
 * that). In a HOME the run replaced (scripts/test.sh's `SHELLMCP_CHECK_ALSO`) it still is one.
 */
const CARRIED = process.getuid?.() !== 0 ? join(homedir(), ".cache", "shellmcp") : undefined;

/** Whether `path`, new since the run started, is {@link CARRIED} or a `.cache` that holds only it. */
function carriedCache(path: string): boolean {
  if (CARRIED === undefined) return false;
  if (path === CARRIED) return true;
  if (path !== dirname(CARRIED)) return false;
  try {
    return readdirSync(path).join() === "shellmcp";
  } catch {
    return false;
  }
}

/** Whether leftovers fail the run (CI) or only warn (a developer's machine, where other programs write too). */
const STRICT = STRICT_PREREQS || process.env.SHELLMCP_CHECK_LEFTOVERS === "1";

/** Processes (other than this one) whose command line names one of the run's own folders: started by a test. */
function strayProcesses(): { pid: number; cmd: string }[] {
  const out: { pid: number; cmd: string }[] = [];
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    let cmd: string;
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
    } catch {
      continue;
    }
    if (OWN.some((d) => cmd.includes(d))) out.push({ pid, cmd });
  }
  return out;
}

afterAll(async () => {
  // A process a test left running (it holds the run's folders): killed here, and a failure under CI.
  let stray = process.platform === "linux" ? strayProcesses() : [];
  for (let i = 0; i < 10 && stray.length > 0; i++) {
    await Bun.sleep(200);
    stray = strayProcesses();
  }
  for (const p of stray) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
  for (const d of OWN) rmSync(d, { recursive: true, force: true });
  if (stray.length > 0) {
    const msg = `the test run left ${stray.length} process(es) running (killed now):\n  ${stray.map((p) => `${p.pid} ${p.cmd}`).join("\n  ")}`;
    if (STRICT) throw new Error(msg);
    console.warn(`WARNING ${msg}`);
  }
  let left: string[] = [];
  // Programs a test stopped may still be exiting (and removing their files): look again for up to 2 s.
  for (let i = 0; i < 10; i++) {
    left = [...snapshot()].filter((p) => !before.has(p) && !carriedCache(p));
    if (left.length === 0) return;
    await Bun.sleep(200);
  }
  const msg = `the test run left ${left.length} path(s) behind:\n  ${left.sort().join("\n  ")}`;
  if (STRICT) throw new Error(msg);
  console.warn(`WARNING ${msg}\n(fails the run under CI=true or SHELLMCP_CHECK_LEFTOVERS=1)`);
});
