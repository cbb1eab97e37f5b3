/**
 * Where git keeps a repository, judged only from what a sandbox could not have forged (issue 34, item 2).
 *
 * Git finds a repository's git dir through pointer files: a `.git` *file* in a work tree (`gitdir: <path>`, for
 * submodules and linked worktrees) and a git dir's `commondir` (a linked worktree's admin folder naming the main
 * git dir). A sandboxed command, or a room program that writes the repository, can create both: a `commondir`
 * written by one room program named any folder, and the next program's room was planned from it — that folder
 * became writable. So a pointer decides where a room writes only when it has the shape git itself gives it:
 *
 * - `commondir` of git dir `G` must resolve to the folder two levels up, with `G` inside its `worktrees/`
 *   (`<common>/worktrees/<name>`: how `git worktree add` lays out every linked worktree), and that folder must be a
 *   git dir (`objects/` and `HEAD`);
 * - a `.git` file in work tree `W` naming `G` is accepted when `G` is a linked worktree's admin folder whose
 *   `gitdir` file names `W/.git` back (the pair git writes), or a submodule's git dir: inside `modules/` of the
 *   git dir of the repository that encloses `W` (found the same way, from `W`'s parent).
 *
 * Anything else (a pointer elsewhere, an unreadable, huge or non-regular pointer file) makes the layout
 * *untrusted*: the caller fails closed (no room; the program runs inside the call's sandbox, with the reason).
 * Pointer files are read through ../untrusted-fs.ts (never blocking, never following a link).
 *
 * Also here: the submodules a repository has ({@link submodulePaths}: `.gitmodules` and the gitlinks of git's index,
 * {@link gitlinksOf}), read by the escalation boundary and by the git guard (./guard.ts).
 */
import { lstatSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { MAX_INDEX_BYTES, readUntrusted, readUntrustedText } from "../../untrusted-fs.ts";
import { canonicalPath } from "../writable.ts";

/** A git repository as found from a folder: its work tree and its git dirs (the own one first, then the common one). */
export interface Repository {
  workTree: string;
  gitDirs: string[];
}

/** Outcome of {@link discoverRepository}: none found, a repository whose pointers hold, or why they do not. */
export type Discovery = { kind: "none" } | { kind: "repository"; repository: Repository } | { kind: "untrusted"; reason: string };

/** How many enclosing repositories a submodule's pointer is checked through (nested submodules). */
const MAX_SUPERPROJECT_DEPTH = 8;

/**
 * The repository `cwd` lies in, as git discovers it (nearest `.git` folder or file upwards; canonical paths), with
 * every pointer on the way checked as the module's docs say. Environment overrides (`GIT_DIR`…) are not consulted:
 * the escalation boundary never passes them on. Never throws.
 */
export function discoverRepository(cwd: string, depth = 0, linkTrusted?: (dotGit: string) => boolean): Discovery {
  for (let d = canonicalPath(cwd); ; d = dirname(d)) {
    const dotGit = join(d, ".git");
    let kind: "dir" | "file" | "other" | "missing";
    try {
      const st = lstatSync(dotGit);
      kind = st.isDirectory() ? "dir" : st.isFile() ? "file" : st.isSymbolicLink() ? (isDirFollowed(dotGit) ? "dir" : "other") : "other";
    } catch {
      kind = "missing";
    }
    if (kind === "missing") {
      if (dirname(d) === d) return { kind: "none" };
      continue;
    }
    if (kind === "other") return { kind: "untrusted", reason: `${dotGit} is neither a folder nor a gitdir file` };
    // A `.git` symlink decides the git dir as a pointer file does: one the sandbox could have made or replaced
    // names any repository (review of issue 34, hole 2), so it is trusted only where the caller says it is.
    if (linkTrusted !== undefined && isLink(dotGit) && !linkTrusted(dotGit))
      return { kind: "untrusted", reason: `${dotGit} is a symbolic link the sandboxed command could have made or replaced` };
    let gitDir: string;
    if (kind === "dir") gitDir = canonicalPath(dotGit);
    else {
      const p = trustedGitdirPointer(d, depth, linkTrusted);
      if (typeof p !== "string") return { kind: "untrusted", reason: p.untrusted };
      gitDir = p;
    }
    const common = trustedCommonDir(gitDir);
    if (typeof common !== "string" && common !== undefined) return { kind: "untrusted", reason: common.untrusted };
    return { kind: "repository", repository: { workTree: d, gitDirs: common === undefined ? [gitDir] : [gitDir, common] } };
  }
}

/**
 * The main git dir that git dir `gitDir` names in its `commondir`, when that file has git's shape (see the
 * module's docs); undefined when there is no `commondir` (or it names `gitDir` itself); `{ untrusted }` otherwise.
 */
export function trustedCommonDir(gitDir: string): string | undefined | { untrusted: string } {
  const file = join(gitDir, "commondir");
  const r = readUntrustedText(file, { maxBytes: 4096 });
  if (!r.ok) return r.why === "missing" ? undefined : { untrusted: r.reason };
  const named = r.text.trim();
  if (named === "") return { untrusted: `${file} is empty` };
  const common = canonicalPath(resolve(gitDir, named));
  if (common === gitDir) return undefined;
  if (basename(dirname(gitDir)) !== "worktrees" || dirname(dirname(gitDir)) !== common)
    return { untrusted: `${file} names ${common}, which is not the git dir holding ${gitDir} in its worktrees/` };
  if (!isGitDir(common)) return { untrusted: `${file} names ${common}, which is not a git dir` };
  return common;
}

/**
 * The git dir that the `.git` file of work tree `workTree` names, when git's own pointer chain names it back (see
 * the module's docs), or `{ untrusted }` with the reason.
 */
export function trustedGitdirPointer(
  workTree: string,
  depth = 0,
  linkTrusted?: (dotGit: string) => boolean,
): string | { untrusted: string } {
  const dotGit = join(workTree, ".git");
  const r = readUntrustedText(dotGit, { maxBytes: 4096 });
  if (!r.ok) return { untrusted: r.reason };
  const m = /^gitdir:\s*(.+?)\s*$/m.exec(r.text);
  if (m === null) return { untrusted: `${dotGit} holds no gitdir: line` };
  const gitDir = canonicalPath(resolve(workTree, m[1]!));
  if (!isGitDirLike(gitDir)) return { untrusted: `${dotGit} names ${gitDir}, which is not a git dir` };
  // A linked worktree: <common>/worktrees/<name>, whose `gitdir` file names this `.git` back.
  if (basename(dirname(gitDir)) === "worktrees") {
    const back = readUntrustedText(join(gitDir, "gitdir"), { maxBytes: 4096 });
    if (back.ok) {
      const named = back.text.trim();
      if (named !== "" && canonicalPath(resolve(gitDir, named)) === canonicalPath(dotGit)) return gitDir;
    }
  }
  // A submodule: inside modules/ of the enclosing repository's git dir.
  if (depth < MAX_SUPERPROJECT_DEPTH && dirname(workTree) !== workTree) {
    const outer = discoverRepository(dirname(workTree), depth + 1, linkTrusted);
    if (outer.kind === "repository") {
      for (const g of outer.repository.gitDirs) {
        const modules = join(g, "modules") + "/";
        if (gitDir.startsWith(modules)) return gitDir;
      }
    }
  }
  return {
    untrusted: `${dotGit} names ${gitDir}, which is neither a linked worktree naming it back nor a submodule of an enclosing repository`,
  };
}

/** Whether `dir` looks like a git dir: `objects/` and `HEAD` (a main git dir or a submodule's). */
export function isGitDir(dir: string): boolean {
  return isPlainDir(join(dir, "objects")) && exists(join(dir, "HEAD"));
}

/** A git dir, or a linked worktree's admin folder (`HEAD` and `commondir`, no `objects/`). */
function isGitDirLike(dir: string): boolean {
  return isGitDir(dir) || (exists(join(dir, "HEAD")) && exists(join(dir, "commondir")));
}

function isPlainDir(p: string): boolean {
  try {
    return lstatSync(p).isDirectory();
  } catch {
    return false;
  }
}

function isLink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

function isDirFollowed(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

function exists(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

/** Mode of a gitlink (submodule) entry in git's index. */
const GITLINK_MODE = 0o160000;

/**
 * Work-tree-relative paths of the submodules of the repository at `gitDir`/`workTree`: every gitlink in the index
 * (versions 2–4, SHA-1 or SHA-256 object names) and every `path =` of `.gitmodules`. A string (the reason) when
 * the index cannot be read although `.gitmodules` exists: then the submodules are unknown, and git is not
 * escalated.
 */
export function submodulePaths(gitDir: string, workTree: string): string[] | string {
  const out = new Set<string>();
  const gm = readUntrustedText(join(workTree, ".gitmodules"));
  if (!gm.ok && gm.why !== "missing") return `cannot read .gitmodules to find the submodules git would enter: ${gm.reason}`;
  const gitmodules = gm.ok ? gm.text : undefined;
  for (const m of (gitmodules ?? "").matchAll(/^\s*path\s*=\s*(.+?)\s*$/gm)) out.add(m[1]!.replace(/^"(.*)"$/, "$1"));
  const ix = readUntrusted(join(gitDir, "index"), { maxBytes: MAX_INDEX_BYTES });
  if (!ix.ok && ix.why !== "missing") return `cannot read git's index to find the submodules git would enter: ${ix.reason}`;
  if (ix.ok) {
    const links = gitlinksOf(ix.data);
    if (links === undefined) {
      if (gitmodules !== undefined) return `cannot read ${join(gitDir, "index")} to find the submodules git would enter`;
    } else for (const l of links) out.add(l);
  }
  return [...out];
}

/** Gitlink paths of an index file, or undefined when it is not an index this parser knows. */
export function gitlinksOf(buf: Buffer): string[] | undefined {
  if (buf.length < 12 || buf.toString("latin1", 0, 4) !== "DIRC") return undefined;
  const version = buf.readUInt32BE(4);
  if (version < 2 || version > 4) return undefined;
  const count = buf.readUInt32BE(8);
  // The object name length is not in the index: try SHA-1, then SHA-256; the right one parses to the end.
  for (const hashLen of [20, 32]) {
    const links = parseEntries(buf, version, count, hashLen);
    if (links !== undefined) return links;
  }
  return undefined;
}

function parseEntries(buf: Buffer, version: number, count: number, hashLen: number): string[] | undefined {
  const links: string[] = [];
  let off = 12;
  let prev = "";
  for (let i = 0; i < count; i++) {
    const start = off;
    if (off + 40 + hashLen + 2 > buf.length) return undefined;
    const mode = buf.readUInt32BE(off + 24);
    off += 40 + hashLen;
    const flags = buf.readUInt16BE(off);
    off += 2;
    if (flags & 0x4000) {
      if (version < 3) return undefined;
      off += 2;
    }
    let path: string;
    if (version === 4) {
      let strip = 0;
      let b: number;
      do {
        if (off >= buf.length) return undefined;
        b = buf[off++]!;
        strip = (strip << 7) | (b & 0x7f);
        if (b & 0x80) strip += 1;
      } while (b & 0x80);
      const end = buf.indexOf(0, off);
      if (end < 0 || strip > prev.length) return undefined;
      path = prev.slice(0, prev.length - strip) + buf.toString("utf8", off, end);
      off = end + 1;
    } else {
      const end = buf.indexOf(0, off);
      if (end < 0) return undefined;
      path = buf.toString("utf8", off, end);
      off = start + Math.ceil((end - start + 1) / 8) * 8;
    }
    if ((flags & 0xfff) !== 0xfff && (flags & 0xfff) !== Buffer.byteLength(path)) return undefined;
    prev = path;
    if ((mode & 0o170000) === GITLINK_MODE) links.push(path);
  }
  // What follows the entries: extensions (4-letter signatures) and the trailing checksum.
  if (off + hashLen > buf.length) return undefined;
  return links;
}
