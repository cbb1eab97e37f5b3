declare const __SHELLMCP_VERSION__: string | undefined;

/** shellmcp's version: package.json's, injected by `build.ts` through `define`; `0.0.0-dev` when run from source. */
export const VERSION: string = typeof __SHELLMCP_VERSION__ === "string" ? __SHELLMCP_VERSION__ : "0.0.0-dev";
