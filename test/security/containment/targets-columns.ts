/** The containment table's shellmcp columns (backend/client), in order; see ./targets.ts. */
export const COLUMNS = ["bwrap/codex", "bwrap/plain", "landlock/codex", "landlock/plain"] as const;
