/** An empty Worker (bench/floor/server.ts `FLOOR_WORKER=1`): what one more JavaScriptCore thread and heap cost. */
(globalThis as unknown as { onmessage: (() => void) | null }).onmessage = () => {};
