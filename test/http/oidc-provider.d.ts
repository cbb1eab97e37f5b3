/** oidc-provider ships no typings: only what test/http/oauth-e2e.test.ts uses. */
declare module "oidc-provider" {
  export default class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    /** A Node request listener (Koa's `callback()`). */
    callback(): (req: unknown, res: unknown) => void;
  }
}
