/**
 * The escalated program's identity (docs/security.md, the escalation boundary's "Program"): whether it is the
 * program the rule granted, whether an entry on its path as named could be replaced, and every `#!` interpreter it
 * runs through (none may be writable by the sandboxed command).
 */
import { realpathSync, statSync } from "node:fs";
import { basename, delimiter, isAbsolute, join } from "node:path";
import { readUntrusted } from "../../untrusted-fs.ts";
import { canonicalPath, canReplaceEntry, canWrite, type WritableView } from "../../sandbox/writable.ts";
import type { EscalationBoundary, Grant } from "./boundary.ts";
import { trustedPath } from "./escalated-env.ts";

/**
 * Why `req` is not the program `grant` names (undefined when it is): `argv[0]` must be the rule's token, the
 * program file's path or its base name (programs dispatch on it: `exec -a git-archive git …` is `git archive`);
 * the canonical file must be one of the `host_executable` paths, the token itself when it is a path, or else
 * what the token resolves to through {@link trustedPath} (a `./id` or `PATH=./bin:$PATH id` that the rule's `id`
 * matched by name is another program).
 */
export function identityMismatch(
  b: EscalationBoundary,
  req: { file: string; argv: readonly string[] },
  real: string,
  grant: Grant,
): string | undefined {
  const argv0 = req.argv[0] ?? "";
  const names = new Set([grant.program, basename(grant.program), req.file, basename(req.file)]);
  if (!names.has(argv0))
    return `argv[0] ${JSON.stringify(argv0)} is neither the rule's program ${JSON.stringify(grant.program)} nor the file ${req.file}`;
  let expected: string[];
  if (grant.hostExecutables !== undefined && grant.hostExecutables.length > 0) expected = [...grant.hostExecutables];
  else if (isAbsolute(grant.program)) expected = [grant.program];
  else {
    const found = lookPath(grant.program, trustedPath(b));
    if (found === undefined) return `the rule's program ${grant.program} is not on the trusted PATH`;
    expected = [found];
  }
  const canon = (p: string) => {
    try {
      return realpathSync(p);
    } catch {
      return p;
    }
  };
  if (!expected.some((e) => canon(e) === real))
    return `${req.file} is not the program the rule names (${grant.program} is ${expected.join(" or ")})`;
  return undefined;
}

/**
 * The first directory entry on `file`'s path, as named (each component judged without following it), that the
 * sandboxed command could replace: a link `./id -> /bin/sh` in a writable folder is such an entry even though
 * its target is not writable. Undefined when there is none.
 */
export function replaceableEntry(w: WritableView, file: string): string | undefined {
  let dir = "/";
  for (const name of file.split("/").filter(Boolean)) {
    const entry = join(canonicalPath(dir), name);
    if (!w.roots.includes(entry) && canReplaceEntry(w, entry)) return join(dir, name);
    dir = join(dir, name);
  }
  return undefined;
}

/** Most `#!` levels the kernel follows (binfmt_script recursion limit). */
const MAX_INTERPRETER_DEPTH = 4;

/**
 * The program and every `#!` interpreter it runs through (canonical paths), or why one of them is writable.
 * `/usr/bin/env NAME` is followed to the NAME it finds on `env.PATH`.
 */
export function interpreterChain(w: WritableView, program: string, env: Record<string, string>): string[] | string {
  const chain: string[] = [];
  let file = program;
  for (let depth = 0; depth <= MAX_INTERPRETER_DEPTH; depth++) {
    if (canWrite(w, file))
      return `${depth === 0 ? "the program file" : "its #! interpreter"} ${file} can be written by the sandboxed command`;
    chain.push(file);
    const line = shebang(file);
    if (line === undefined) return chain;
    const [interp, ...rest] = line.split(/[ \t]+/).filter(Boolean);
    if (interp === undefined) return chain; // "#!" alone: the kernel refuses to exec it
    if (!isAbsolute(interp)) return `the #! interpreter ${interp} of ${file} is a relative path`;
    let real: string;
    try {
      real = realpathSync(interp);
    } catch {
      return chain; // the exec fails with ENOENT anyway
    }
    if (basename(real) === "env") {
      const name = rest.find((a) => !a.startsWith("-") && !a.includes("="));
      if (name !== undefined) {
        if (canWrite(w, real)) return `its #! interpreter ${real} can be written by the sandboxed command`;
        chain.push(real);
        const found = lookPath(name, env.PATH ?? "");
        if (found === undefined) return `${name}, which the #! line of ${file} runs through env, is not on the escalated PATH`;
        file = found;
        continue;
      }
    }
    file = real;
  }
  return `more than ${MAX_INTERPRETER_DEPTH} levels of #! interpreters`;
}

/** The `#!` line of `file` without `#!`, or undefined when it has none (or is no regular file: the exec fails). */
function shebang(file: string): string | undefined {
  const r = readUntrusted(file, { head: 256 });
  if (!r.ok) return undefined;
  const buf = r.data;
  if (buf.length < 2 || buf[0] !== 0x23 || buf[1] !== 0x21) return undefined;
  const end = buf.indexOf(0x0a);
  return buf
    .subarray(2, end < 0 ? buf.length : end)
    .toString("latin1")
    .trim();
}

/** `execvp`-style lookup of `name` on `path` (canonical result). */
function lookPath(name: string, path: string): string | undefined {
  if (name.includes("/")) return isAbsolute(name) ? canonicalPath(name) : undefined;
  for (const dir of path.split(delimiter)) {
    if (dir === "" || !isAbsolute(dir)) continue;
    const p = join(dir, name);
    try {
      const st = statSync(p);
      if (st.isFile() && (st.mode & 0o111) !== 0) return realpathSync(p);
    } catch {
      // not here
    }
  }
  return undefined;
}
