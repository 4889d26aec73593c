/**
 * Client-side prediction of the local player's movement, with reconciliation.
 *
 * Each tick the client makes an input ({@link Prediction.handleLocalInput}): it gets the
 * next `u16` sequence, is snapped to the wire grids (the server moves with the decoded
 * values, so prediction must too), moves the predicted position one step through the
 * ported `stepMovement`, and is kept until the server acknowledges it. When a server state
 * for the local player arrives ({@link Prediction.handleServerState}) with the
 * `last_input_sequence` it has applied, the acknowledged inputs are dropped and the rest
 * are replayed from the server's position: the prediction converges on what the server
 * will compute, and a correction (a push, a lost input) is absorbed within one round trip.
 *
 * The server applies the newest input per tick, so this matches it exactly while one input
 * reaches the server per tick; inputs merged or lost on the way show up as a correction.
 * Corrections are applied at once to {@link Prediction.position}; {@link Prediction.renderPosition}
 * blends them in over `smoothingMs` so the player does not see a snap.
 */

import { type InputCommand, nextSequence, quantizeInput, sequenceNewer } from "./input.js";
import { type Aabb, type MovementParams, type Vec2, stepMovement } from "./movement.js";
import type { ConnectionStats } from "@tickwire/client";

/** What the player does this tick: a command without its sequence. */
export type LocalInput = Omit<InputCommand, "sequence">;

/** The server's word on the local player. */
export interface ServerPlayerState {
  /** Its position after the tick. */
  position: Vec2;
  /** The newest input sequence the server had applied by then; `null` before the first. */
  lastInputSequence: number | null;
}

/** Options of a {@link Prediction}. */
export interface PredictionOptions {
  /** Movement parameters, exactly the server's. */
  params: MovementParams;
  /** The map's wall boxes, in the server's order. */
  walls: readonly Aabb[];
  /** Where the player starts. */
  position: Vec2;
  /** The first input's sequence. Default 0. */
  firstSequence?: number;
  /** Fed one RTT sample per newly acknowledged input. */
  stats?: ConnectionStats;
  /** Most unacknowledged inputs kept (older ones are dropped). Default 256; at most 32767. */
  maxPending?: number;
  /** Time over which a correction is blended into {@link Prediction.renderPosition}, ms. Default 100. */
  smoothingMs?: number;
}

interface Pending {
  command: InputCommand;
  sentAt: number;
}

/** The local player's predicted movement. */
export class Prediction {
  private readonly params: MovementParams;
  private readonly walls: readonly Aabb[];
  private readonly stats: ConnectionStats | undefined;
  private readonly maxPending: number;
  private readonly smoothingMs: number;
  private pending: Pending[] = [];
  private predicted: Vec2;
  private sequence: number;
  private acked: number | null = null;
  /** Visual offset left by the last corrections, decaying to zero. */
  private error: Vec2 = { x: 0, y: 0 };
  private errorAt = 0;

  constructor(options: PredictionOptions) {
    this.params = options.params;
    this.walls = options.walls;
    this.stats = options.stats;
    this.maxPending = Math.min(options.maxPending ?? 256, 0x7fff);
    this.smoothingMs = options.smoothingMs ?? 100;
    this.predicted = { ...options.position };
    this.sequence = (options.firstSequence ?? 0) & 0xffff;
  }

  /** The predicted position, corrections applied. */
  get position(): Vec2 {
    return { ...this.predicted };
  }

  /** Inputs sent and not yet acknowledged. */
  get pendingCount(): number {
    return this.pending.length;
  }

  /** The newest input sequence the server acknowledged. */
  get lastAcknowledged(): number | null {
    return this.acked;
  }

  /**
   * Makes this tick's command from `input`, predicts its step, and returns the command to
   * send (already on the wire grids). `now` is ms on a monotonic clock, for RTT.
   */
  handleLocalInput(now: number, input: LocalInput): InputCommand {
    const command = quantizeInput({ ...input, sequence: this.sequence });
    this.sequence = nextSequence(this.sequence);
    this.pending.push({ command, sentAt: now });
    if (this.pending.length > this.maxPending) {
      this.pending.shift();
    }
    this.predicted = this.step(this.predicted, command);
    return command;
  }

  /** Reconciles with a server state for the local player, received at `now`. */
  handleServerState(now: number, state: ServerPlayerState): void {
    const ack = state.lastInputSequence;
    if (ack !== null) {
      if (this.acked !== null && !sequenceNewer(ack, this.acked)) {
        if (ack !== this.acked) {
          return; // an older state than one already reconciled with
        }
      } else {
        const acknowledged = this.pending.find((p) => p.command.sequence === ack);
        if (acknowledged !== undefined) {
          this.stats?.handleRttSample(now - acknowledged.sentAt);
        }
        this.acked = ack;
      }
      while (this.pending.length > 0 && !sequenceNewer(this.pending[0]!.command.sequence, ack)) {
        this.pending.shift();
      }
    }
    let replayed: Vec2 = { x: state.position.x, y: state.position.y };
    for (const { command } of this.pending) {
      replayed = this.step(replayed, command);
    }
    const shown = this.renderPosition(now);
    this.predicted = replayed;
    // Keep drawing where the player was drawn; the difference decays from here.
    this.error = { x: shown.x - replayed.x, y: shown.y - replayed.y };
    this.errorAt = now;
  }

  /** Where to draw the player at `now`: the prediction plus a decaying share of past corrections. */
  renderPosition(now: number): Vec2 {
    if (this.smoothingMs <= 0) {
      return this.position;
    }
    const remaining = Math.max(0, 1 - (now - this.errorAt) / this.smoothingMs);
    return { x: this.predicted.x + this.error.x * remaining, y: this.predicted.y + this.error.y * remaining };
  }

  /**
   * Starts again from `position` (a respawn, a teleport, a reconnection): no pending inputs.
   * `nextSequence` continues the sequence from there (after a reconnection, one past the
   * server's `last_input`, which it would otherwise ignore as stale); by default it goes on.
   */
  reset(position: Vec2, nextSequence?: number): void {
    this.pending = [];
    this.predicted = { ...position };
    this.error = { x: 0, y: 0 };
    if (nextSequence !== undefined) {
      this.sequence = nextSequence & 0xffff;
    }
  }

  /** The sequence the next input will carry. */
  get nextSequence(): number {
    return this.sequence;
  }

  private step(position: Vec2, command: InputCommand): Vec2 {
    return stepMovement(position, { x: command.moveX, y: command.moveY }, this.params, this.walls);
  }
}
