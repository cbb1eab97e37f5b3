/**
 * `[shellmcp] input_required_timeout_ms` and `task_after_ms` (docs/mcp-eras.md): the modern era's two timeouts as
 * config keys (the flags `--input-required-timeout-ms` and `--task-after-ms` are driven by test/mcp/modern.test.ts).
 */
import { describe, expect, test } from "bun:test";
import { modernEraConfig } from "../../src/config/config.ts";

describe("modernEraConfig", () => {
  test("absent: both undefined (the defaults of src/mcp/modern.ts apply)", () =>
    expect(modernEraConfig({})).toEqual({ inputRequiredTimeoutMs: undefined, taskAfterMs: undefined }));
  test("set: both read, in ms", () =>
    expect(modernEraConfig({ shellmcp: { input_required_timeout_ms: 90000, task_after_ms: 2000 } })).toEqual({
      inputRequiredTimeoutMs: 90000,
      taskAfterMs: 2000,
    }));
  test("a wrong type or value names the key", () => {
    expect(() => modernEraConfig({ shellmcp: { input_required_timeout_ms: 0 } })).toThrow("shellmcp.input_required_timeout_ms");
    expect(() => modernEraConfig({ shellmcp: { task_after_ms: "soon" } })).toThrow("shellmcp.task_after_ms");
    expect(() => modernEraConfig({ shellmcp: { task_after_ms: 2 * 3600 * 1000 } })).toThrow("shellmcp.task_after_ms");
  });
});
