/**
 * A connection's one timer, shared by the WebSocket and WebTransport transports: the
 * handshake deadline until the connection parameters arrive, then (when a silence limit is
 * set) the silence limit, restarted by everything heard from the server.
 */

import type { DisconnectReason } from "./close-codes.js";
import type { Clock } from "./timers.js";

/** A second look before a silence counts (see {@link ConnectionTimer.heard}), ms. */
const SILENCE_CONFIRM_MS = 250;

/** What the timer found: the connection closes with this reason and message. */
export type Expired = (reason: DisconnectReason, message: string) => void;

export class ConnectionTimer {
  private readonly clock: Clock;
  private readonly silenceTimeoutMs: number | null;
  private readonly expired: Expired;
  private timer: unknown = null;
  private lastHeard = 0;

  constructor(clock: Clock, silenceTimeoutMs: number | null, expired: Expired) {
    this.clock = clock;
    this.silenceTimeoutMs = silenceTimeoutMs;
    this.expired = expired;
  }

  /** Expires with `reason` after `ms` unless disarmed first (the handshake deadline). */
  arm(ms: number, reason: DisconnectReason, message: string): void {
    this.disarm();
    this.timer = this.clock.schedule(() => {
      this.timer = null;
      this.expired(reason, message);
    }, ms);
  }

  /**
   * Restarts the silence limit: a timer at the limit that re-arms itself for the time left.
   * Silence is confirmed once more a moment later before giving up: a page whose main
   * thread was blocked (a long frame, a starved machine) runs this timer before the
   * messages that arrived meanwhile, and must not take its own stall for the server's.
   */
  heard(): void {
    this.lastHeard = this.clock.now();
    if (this.silenceTimeoutMs === null || this.timer !== null) {
      return;
    }
    const limit = this.silenceTimeoutMs;
    let confirming = false;
    const check = (): void => {
      this.timer = null;
      const quiet = this.clock.now() - this.lastHeard;
      if (quiet < limit) {
        confirming = false;
        this.timer = this.clock.schedule(check, limit - quiet);
      } else if (!confirming) {
        confirming = true;
        this.timer = this.clock.schedule(check, SILENCE_CONFIRM_MS);
      } else {
        this.expired("server_silent", `nothing from the server for ${limit} ms`);
      }
    };
    this.timer = this.clock.schedule(check, limit);
  }

  /** Cancels whatever is pending. */
  disarm(): void {
    if (this.timer !== null) {
      this.clock.cancel(this.timer);
      this.timer = null;
    }
  }
}
