/**
 * Parking: where a modern call waits for a human between the request answered `input_required` and its retry, and
 * where a session's approvals wait for the next request about that session.
 *
 * - {@link Parking.park} puts a call in the table under a random handle and mints its `requestState`;
 *   {@link Parking.redeem} takes it out once (a state is good once), refusing with an opaque reason (logged:
 *   `malformed`, `mac`, `expired`, `bind`, `used`; never the state's content); a parked call nobody redeems is
 *   ended after `parkedTimeoutMs` (its approvals denied, its command aborted).
 * - The session backlog: an approval met by a session's command after its `exec_command` was answered is asked on
 *   an unfinished call about that session ({@link Parking.track}) if there is one, else kept for the next one
 *   ({@link Parking.takeBacklog}) and denied after `parkedTimeoutMs`.
 */
import { log } from "../../log.ts";
import type { ElicitAnswer } from "../elicitation.ts";
import type { Asked, ModernCall } from "./call.ts";
import type { Clock, TimerHandle } from "./clock.ts";
import { ModernRpcError, RPC } from "./envelope.ts";
import { randomId, RequestStateCodec, type RefusalReason } from "./request-state.ts";

/** The parking table and the session backlog of one modern era. */
export class Parking {
  private readonly codec = new RequestStateCodec();
  /** Parked calls by handle. */
  private readonly parked = new Map<string, { call: ModernCall; timer: TimerHandle }>();
  /** Unfinished calls that concern a session (`write_stdin`), by session id. */
  private readonly sessionCalls = new Map<number, Set<ModernCall>>();
  /**
   * Approvals of sessions' commands met when no call about the session was unfinished, by session id: each waits
   * for the next such call, and is denied (`cancel`) after `parkedTimeoutMs` if none comes.
   */
  private readonly backlog = new Map<number, { asked: Asked; timer: TimerHandle }[]>();

  constructor(
    private readonly clock: Clock,
    /** How long a parked call (or a backlogged approval) waits, ms. */
    private readonly parkedTimeoutMs: number,
  ) {}

  /** Park `call` (its request is being answered `input_required`); returns the `requestState` that redeems it. */
  park(call: ModernCall): string {
    const handle = randomId(16);
    const expiresAt = this.clock.now() + this.parkedTimeoutMs;
    const timer = this.clock.setTimer(() => this.expire(handle), this.parkedTimeoutMs);
    this.parked.set(handle, { call, timer });
    call.parked();
    return this.codec.mint({ h: handle, d: call.digest, e: expiresAt });
  }

  /**
   * The parked call a retry's `requestState` names, for a call whose digest is `digest`, taken out of the table.
   * Refused (-32602 `Invalid or expired requestState`, `data.reason: "invalid_request_state"`, the reason logged) when
   * the state is malformed, not signed here, expired, another call's, or used; a refused state consumes nothing.
   */
  redeem(state: unknown, digest: string): ModernCall {
    const verdict = this.codec.verify(state, this.clock.now());
    const handle = verdict.ok ? verdict.payload.h : undefined;
    const entry = handle === undefined ? undefined : this.parked.get(handle);
    const reason: RefusalReason | undefined = !verdict.ok
      ? verdict.reason
      : verdict.payload.d !== digest
        ? "bind"
        : entry === undefined
          ? "used"
          : undefined;
    if (reason !== undefined || handle === undefined || entry === undefined) {
      log.warn("refused a requestState", { reason });
      throw new ModernRpcError(RPC.INVALID_PARAMS, "Invalid or expired requestState", { reason: "invalid_request_state" });
    }
    entry.timer.cancel();
    this.parked.delete(handle);
    entry.call.unparked();
    return entry.call;
  }

  /** A parked call nobody answered in time: its approvals are denied and its command ended. */
  private expire(handle: string): void {
    const entry = this.parked.get(handle);
    if (entry === undefined) return;
    this.parked.delete(handle);
    log.notice("approval not answered in time: denied, command ended", { tool: entry.call.name, ms: this.parkedTimeoutMs });
    entry.call.end();
  }

  /** `call` concerns a session: approvals of that session's command are asked on it while it is unfinished. */
  track(call: ModernCall): void {
    if (call.session === undefined) return;
    let set = this.sessionCalls.get(call.session);
    if (set === undefined) this.sessionCalls.set(call.session, (set = new Set()));
    set.add(call);
  }

  /** `call` no longer carries approvals of its session. */
  forget(call: ModernCall): void {
    if (call.session === undefined) return;
    const set = this.sessionCalls.get(call.session);
    set?.delete(call);
    if (set?.size === 0) this.sessionCalls.delete(call.session);
  }

  /**
   * `call`'s result is being sent: it is finished; approvals still pending (met while it was parked or in its last
   * moment) go to the next request about its session, or are denied when it has none.
   */
  settle(call: ModernCall): void {
    call.finished = true;
    this.forget(call);
    if (call.pending.size === 0) return;
    const session = call.session;
    const later =
      call.late ?? (session === undefined ? undefined : (m: string, s: Record<string, unknown>) => this.sessionAsk(session, m, s));
    for (const asked of call.pending.values())
      if (later === undefined) asked.answer({ action: "cancel" });
      else void later(asked.message, asked.requestedSchema).then(asked.answer);
    call.pending.clear();
  }

  /**
   * An approval met by session `id`'s command after its `exec_command` was answered: asked on an unfinished call
   * about that session if there is one (its request, or its retry, carries it), else kept for the next one and
   * denied after `parkedTimeoutMs`.
   */
  sessionAsk(id: number, message: string, requestedSchema: Record<string, unknown>): Promise<ElicitAnswer> {
    for (const c of this.sessionCalls.get(id) ?? []) if (!c.over) return c.ask(message, requestedSchema);
    return new Promise((answer) => {
      const entry = {
        asked: { message, requestedSchema, answer },
        timer: this.clock.setTimer(() => {
          const list = this.backlog.get(id) ?? [];
          list.splice(list.indexOf(entry), 1);
          if (list.length === 0) this.backlog.delete(id);
          log.notice("approval not answered in time: denied", { session: id, ms: this.parkedTimeoutMs });
          answer({ action: "cancel" });
        }, this.parkedTimeoutMs),
      };
      const list = this.backlog.get(id) ?? [];
      list.push(entry);
      this.backlog.set(id, list);
      log.info("a session's command waits for a human's approval until the next request about it", { session: id });
    });
  }

  /**
   * Move session `id`'s waiting approvals into `call` (pending: its request answers `input_required`); one promise
   * per approval, resolved once it is answered.
   */
  takeBacklog(id: number, call: ModernCall): Promise<void>[] {
    const list = this.backlog.get(id) ?? [];
    this.backlog.delete(id);
    return list.map(({ asked, timer }) => {
      timer.cancel();
      return new Promise<void>((answered) => {
        void call.ask(asked.message, asked.requestedSchema).then((a) => {
          asked.answer(a);
          answered();
        });
      });
    });
  }

  /** The client went away: parked calls leave the table (ended by the era), backlogged approvals are denied. */
  close(): void {
    for (const { timer } of this.parked.values()) timer.cancel();
    this.parked.clear();
    for (const waiting of this.backlog.values())
      for (const { asked, timer } of waiting) {
        timer.cancel();
        asked.answer({ action: "cancel" });
      }
    this.backlog.clear();
  }
}
