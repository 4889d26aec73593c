/**
 * When to try again after a connection ends: capped exponential backoff with jitter, and
 * a decision per {@link DisconnectReason} (or matchmaking failure) whether trying again can
 * help at all. Pure: randomness comes in as a function.
 */

import type { DisconnectReason } from "../transport/close-codes.js";
import type { MatchmakeErrorKind } from "../transport/matchmaking.js";

/** Tunables of a {@link ReconnectPolicy}. */
export interface ReconnectConfig {
  /** First delay, ms. Default 250: a blip should cost less than a second. */
  initialDelayMs: number;
  /** Longest delay, ms. Default 8000: a returning network is noticed within seconds. */
  maxDelayMs: number;
  /** Growth per attempt. Default 2. */
  multiplier: number;
  /**
   * Fraction of each delay drawn at random (0 to 1), so clients dropped together do not
   * return together. Default 0.5: the delay is uniform in `[d/2, d]`.
   */
  jitter: number;
  /**
   * Attempts in a row before giving up after a transient failure. Default 20, which with
   * the defaults is about two minutes, past the server's default seat hold.
   */
  maxAttempts: number;
  /**
   * Attempts after the server said it is shutting down or draining (4003, matchmaking
   * 503, room full): another instance may take over, but not forever. Default 3.
   */
  maxAttemptsWhenUnavailable: number;
}

/** The defaults, documented on {@link ReconnectConfig}. */
export const DEFAULT_RECONNECT: ReconnectConfig = {
  initialDelayMs: 250,
  maxDelayMs: 8000,
  multiplier: 2,
  jitter: 0.5,
  maxAttempts: 20,
  maxAttemptsWhenUnavailable: 3,
};

/** How a failure bears on trying again. */
export type RetryClass = "transient" | "unavailable" | "final";

/** Whether a disconnect is worth a reconnection. */
export function classifyDisconnect(reason: DisconnectReason): RetryClass {
  switch (reason) {
    case "timed_out":
    case "slow_client":
    case "handshake_timed_out":
    case "server_silent":
    case "connection_lost":
    // A fresh token from a new matchmake fixes these.
    case "token_expired":
    case "token_replayed":
    case "bad_token":
      return "transient";
    case "server_shutdown":
    case "server_full":
      return "unavailable";
    case "requested":
    case "kicked":
    case "protocol_violation":
    // This client's proof was wrong: a fresh token would be refused the same way.
    case "bad_proof":
    case "connected_elsewhere":
    case "message_too_large":
    case "transport_unavailable":
      return "final";
  }
}

/** Whether a matchmaking failure is worth another attempt. */
export function classifyMatchmakeError(kind: MatchmakeErrorKind): RetryClass {
  switch (kind) {
    case "network":
    case "rate_limited":
    case "http":
      return "transient";
    case "unavailable":
    case "room_full":
      return "unavailable";
    case "bad_request":
    case "unauthorized":
    case "not_found":
    case "bad_answer":
      return "final";
  }
}

/** Counts attempts and picks delays; {@link reset} it once a connection succeeds. */
export class ReconnectPolicy {
  private readonly config: ReconnectConfig;
  private readonly random: () => number;
  private attempts = 0;
  private unavailable = 0;

  constructor(config: Partial<ReconnectConfig> = {}, random: () => number = Math.random) {
    this.config = { ...DEFAULT_RECONNECT, ...config };
    this.random = random;
  }

  /** Attempts since the last success. */
  get attemptCount(): number {
    return this.attempts;
  }

  /** The delay before the next attempt after a failure of class `kind`, or `null` to give up. */
  next(kind: RetryClass): number | null {
    if (kind === "final") {
      return null;
    }
    if (kind === "unavailable") {
      this.unavailable += 1;
      if (this.unavailable > this.config.maxAttemptsWhenUnavailable) {
        return null;
      }
    }
    if (this.attempts >= this.config.maxAttempts) {
      return null;
    }
    const { initialDelayMs, maxDelayMs, multiplier, jitter } = this.config;
    const full = Math.min(maxDelayMs, initialDelayMs * multiplier ** this.attempts);
    this.attempts += 1;
    return full * (1 - jitter * this.random());
  }

  /** A connection succeeded: the next failure starts from the first delay again. */
  reset(): void {
    this.attempts = 0;
    this.unavailable = 0;
  }
}
