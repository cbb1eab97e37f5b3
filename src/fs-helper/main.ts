/**
 * arg0 role `codex-fs` (also `shellmcp --codex-run-as-fs-helper`): the exec-server's filesystem helper, run inside
 * the sandbox for fs operations that carry one (exec-server spec §6.3 step 5).
 *
 * stdin: one JSON document `{"operation":"fs/readFile","params":{…the RPC's params…}}`, then EOF.
 * stdout: one line, `{"status":"ok","payload":{"operation":…,"response":{…}}}` or
 * `{"status":"error","payload":{"code":-32004,"message":"No such file or directory (os error 2)"}}`.
 * Exit 0 when an answer was written (also for operation errors); 2 for unusable input (message on stderr).
 */
import { FS_METHODS, runFsOperation, type FsMethod } from "../exec-server/fs-ops.ts";
import { toRpcError } from "../exec-server/rpc.ts";
import { writeStderr } from "../stderr.ts";

/** Run the helper; returns the exit status. */
export async function fsHelperMain(_args: string[]): Promise<number> {
  let req: { operation?: unknown; params?: unknown };
  try {
    req = JSON.parse(await Bun.stdin.text()) as typeof req;
  } catch (e) {
    writeStderr(`codex-fs: stdin is not one JSON request: ${(e as Error).message}\n`);
    return 2;
  }
  if (typeof req !== "object" || req === null || !(FS_METHODS as readonly unknown[]).includes(req.operation)) {
    writeStderr(`codex-fs: unknown operation ${JSON.stringify((req as { operation?: unknown } | null)?.operation)}\n`);
    return 2;
  }
  const operation = req.operation as FsMethod;
  let answer: unknown;
  try {
    answer = { status: "ok", payload: { operation, response: await runFsOperation(operation, req.params) } };
  } catch (e) {
    answer = { status: "error", payload: toRpcError(e) };
  }
  await Bun.write(Bun.stdout, `${JSON.stringify(answer)}\n`);
  return 0;
}
