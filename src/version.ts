declare const __SHELLMCP_VERSION__: string | undefined;

/** shellmcp's version: package.json's, injected by `build.ts` through `define`; `0.0.0-dev` when run from source. */
export const VERSION: string = typeof __SHELLMCP_VERSION__ === "string" ? __SHELLMCP_VERSION__ : "0.0.0-dev";

/**
 * Where the documentation is read: the repository's `docs/` folder on its forge (a release tarball carries no
 * `docs/`). The CLI's help says it once and names pages relative to it (`approvals.md`); the tarball's README too.
 */
export const DOCS_URL = "https://github.com/shellmcp/shellmcp/tree/main/docs";
