/**
 * The backend choice moved to ../shell/backend-choice.ts (issue 39, "one launch path": the exec-server, a command of
 * the same layer, chooses through it too); re-exported here for its importers.
 */
export { BackendChoice, type CallContext } from "../shell/backend-choice.ts";
