/**
 * The environment a command gets in proxy mode: Codex 0.169's set (`proxy.rs::apply_proxy_env_overrides`, observed
 * in docs/network.md), applied after `shell_environment_policy` so that `include_only` cannot strip it.
 */

/** Variables that carry the HTTP proxy URL (Codex 0.169). */
export const HTTP_PROXY_VARS = [
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "http_proxy",
  "https_proxy",
  "WS_PROXY",
  "WSS_PROXY",
  "ws_proxy",
  "wss_proxy",
  "YARN_HTTP_PROXY",
  "YARN_HTTPS_PROXY",
  "NPM_CONFIG_HTTP_PROXY",
  "NPM_CONFIG_HTTPS_PROXY",
  "NPM_CONFIG_PROXY",
  "npm_config_http_proxy",
  "npm_config_https_proxy",
  "npm_config_proxy",
  "BUNDLE_HTTP_PROXY",
  "BUNDLE_HTTPS_PROXY",
  "PIP_PROXY",
  "DOCKER_HTTP_PROXY",
  "DOCKER_HTTPS_PROXY",
] as const;

/** Variables that carry the SOCKS5 URL (`socks5h://`), or the HTTP URL when SOCKS5 is off. */
export const SOCKS_PROXY_VARS = ["ALL_PROXY", "all_proxy", "FTP_PROXY", "ftp_proxy"] as const;

/** Variables that carry the no-proxy list (empty unless `allow_local_binding`). */
export const NO_PROXY_VARS = [
  "NO_PROXY",
  "no_proxy",
  "NPM_CONFIG_NOPROXY",
  "npm_config_noproxy",
  "YARN_NO_PROXY",
  "BUNDLE_NO_PROXY",
] as const;

/** Codex 0.169's no-proxy list with `allow_local_binding = true`. */
export const LOCAL_NO_PROXY = "localhost,127.0.0.1,::1,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16";

/**
 * The proxy variables for a command whose proxy listens on `127.0.0.1:http` (HTTP) and `127.0.0.1:socks` (SOCKS5,
 * absent when off), as Codex 0.169 sets them: the HTTP URL in every HTTP variable, `socks5h://` in `ALL_PROXY` and
 * `FTP_PROXY`, `CODEX_NETWORK_PROXY_ACTIVE=1`, `CODEX_NETWORK_ALLOW_LOCAL_BINDING=0|1`, `NODE_USE_ENV_PROXY=1`,
 * `ELECTRON_GET_USE_PROXY=true`, and the no-proxy variables (empty, or the local list with `allow_local_binding`).
 */
export function proxyEnvironment(ports: { http: number; socks?: number }, allowLocalBinding: boolean): Record<string, string> {
  const http = `http://127.0.0.1:${ports.http}`;
  const socks = ports.socks === undefined ? http : `socks5h://127.0.0.1:${ports.socks}`;
  const env: Record<string, string> = {};
  for (const k of HTTP_PROXY_VARS) env[k] = http;
  for (const k of SOCKS_PROXY_VARS) env[k] = socks;
  for (const k of NO_PROXY_VARS) env[k] = allowLocalBinding ? LOCAL_NO_PROXY : "";
  env.CODEX_NETWORK_PROXY_ACTIVE = "1";
  env.CODEX_NETWORK_ALLOW_LOCAL_BINDING = allowLocalBinding ? "1" : "0";
  env.NODE_USE_ENV_PROXY = "1";
  env.ELECTRON_GET_USE_PROXY = "true";
  return env;
}
