declare const __SHELLMCP_VERSION__: string | undefined;

/** shellmcp's version: package.json's, injected by `build.ts` through `define`; `0.0.0-dev` when run from source. */
export const VERSION: string = typeof __SHELLMCP_VERSION__ === "string" ? __SHELLMCP_VERSION__ : "0.0.0-dev";

/**
 * Where the documentation is read: the `docs/` folder beside the executable in a release tarball (scripts/release.ts
 * copies it there), the same folder of the source repository otherwise. No web address: the project names none
 * it could keep. The CLI's help says it once and names pages relative to it (`approvals.md`); the tarball's README too.
 */
export const DOCS_WHERE = "docs/ beside this executable in a release tarball, or docs/ of the source repository";
