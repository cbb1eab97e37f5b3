/**
 * `command_might_be_dangerous` as Codex 0.97 shipped it (docs/escalation.md, "The danger heuristic"): the fallback that makes an
 * exec no rule matched `prompt` instead of `allow`.
 */
import { shlexSplit } from "../../execpolicy/shlex.ts";

const GIT_OPTS_WITH_VALUE = new Set([
  "-C",
  "-c",
  "--config-env",
  "--exec-path",
  "--git-dir",
  "--namespace",
  "--super-prefix",
  "--work-tree",
]);

function shortGroup(t: string, letters: string): boolean {
  return /^-[A-Za-z]+$/.test(t) && [...letters].some((l) => t.slice(1).includes(l));
}

function gitDangerous(args: readonly string[]): boolean {
  let i = 0;
  while (i < args.length) {
    const t = args[i]!;
    if (GIT_OPTS_WITH_VALUE.has(t)) {
      i += 2;
      continue;
    }
    if (t.startsWith("-")) {
      i++;
      continue;
    }
    break;
  }
  const sub = args[i];
  const rest = args.slice(i + 1);
  switch (sub) {
    case "reset":
    case "rm":
      return true;
    case "branch":
      return rest.some((t) => t === "-d" || t === "-D" || t === "--delete" || t.startsWith("--delete=") || shortGroup(t, "dD"));
    case "push":
      return rest.some(
        (t) =>
          t === "--force" ||
          t === "--force-with-lease" ||
          t.startsWith("--force-with-lease=") ||
          t === "--force-if-includes" ||
          t.startsWith("--force-if-includes=") ||
          t === "--delete" ||
          t.startsWith("--delete=") ||
          t === "-f" ||
          t === "-d" ||
          shortGroup(t, "fd") ||
          (t.length > 1 && (t.startsWith("+") || t.startsWith(":"))),
      );
    case "clean":
      return rest.some((t) => t === "--force" || t.startsWith("--force=") || t === "-f" || shortGroup(t, "f"));
    default:
      return false;
  }
}

/** Plain commands of a `-c` script, or undefined when it has anything beyond words and `&& || ; |`. */
function plainCommands(script: string): string[][] | undefined {
  if (/[$`()<>{}*?\[\]\n\\]/.test(script)) return undefined;
  const parts = script.split(/&&|\|\||;|\|/);
  const out: string[][] = [];
  for (const p of parts) {
    const words = shlexSplit(p);
    if (words === undefined) return undefined;
    if (words.length > 0) out.push(words);
  }
  return out;
}

/** Whether `cmd` (program name normalised as the policy sees it, then its arguments) might be dangerous. */
export function commandMightBeDangerous(cmd: readonly string[]): boolean {
  const [name, ...args] = cmd;
  if (name === undefined) return false;
  if (name.endsWith("git")) return gitDangerous(args);
  if (name === "rm") return args[0] === "-f" || args[0] === "-rf";
  if (name === "sudo") return commandMightBeDangerous(args);
  if ((name === "bash" || name === "zsh" || name === "sh") && (args[0] === "-c" || args[0] === "-lc") && args[1] !== undefined) {
    return (plainCommands(args[1]) ?? []).some(commandMightBeDangerous);
  }
  return false;
}
