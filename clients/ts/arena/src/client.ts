/**
 * The arena game client: a {@link TickwireClient} (matchmaking, WebSocket, reconnection that
 * keeps the seat) plus everything the arena needs on top — the welcome, the snapshot decoder
 * and its acks, inputs at the server's tick rate with prediction and reconciliation of the
 * local player, interpolation of the others, the roster, scores and chat.
 *
 * ```ts
 * const arena = new ArenaClient({ name: "Ada", map: await fetchArenaMap() });
 * arena.on("status", (status) => showBanner(status));
 * arena.on("chat", (line) => addChatLine(`${line.name}: ${line.text}`));
 * arena.start();
 * function frame(now: number) {
 *   arena.update(now, { moveX, moveY, aim, buttons }); // sends inputs when a tick is due
 *   draw(arena.view(now));                           // predicted self, interpolated others
 *   requestAnimationFrame(frame);
 * }
 * requestAnimationFrame(frame);
 * ```
 *
 * Time comes in as an argument (ms on the clock the client was given, `performance.now()`
 * by default), so tests drive it with a virtual clock. Nothing the server sends can make
 * this throw: bad messages are counted ({@link ArenaClient.problems}) and dropped.
 */

import {
  type ClientFailure,
  type Clock,
  type ConnectionStats,
  DecodeError,
  type Disconnect,
  Emitter,
  InterpolationBuffer,
  type MatchmakeError,
  type MatchmakeRequest,
  TickwireClient,
  type TickwireClientOptions,
  lerpAngle,
  systemClock,
} from "@tickwire/client";

import { FIRE, type InputCommand } from "./input.js";
import type { ArenaMapInfo } from "./map.js";
import {
  INPUT,
  MAX_CHAT_BYTES,
  PROTOCOL_VERSION,
  RELIABLE,
  SNAPSHOT,
  type Score,
  type ServerMessage,
  type Welcome,
  decodeServerMessage,
  encodeClientInput,
  encodeClientMessage,
  truncateUtf8,
} from "./messages.js";
import { type MovementParams, tickSeconds } from "./movement.js";
import { type LocalInput, Prediction } from "./prediction.js";
import { type BulletView, type DecodedSnapshot, type EntityId, SnapshotDecoder, SnapshotError, SnapshotSchema } from "./snapshot.js";

/** Options of an {@link ArenaClient}: the {@link TickwireClient}'s, plus the arena's. */
export interface ArenaClientOptions extends Omit<TickwireClientOptions, "request" | "silenceTimeoutMs"> {
  /** The map (`fetchArenaMap()`): its walls are what prediction slides along. */
  map: ArenaMapInfo;
  /** The display name asked for (the server may refuse a bad one: matchmaking fails). */
  name?: string;
  /** The matchmaking request. Default `{ kind: "arena", name }`. */
  request?: MatchmakeRequest;
  /**
   * Give up on a connection after this long without a message, ms. Default 5000: the arena
   * sends a snapshot every tick, so silence means a dead link (the server's own limit is
   * 10 s), and the seat is kept.
   */
  silenceTimeoutMs?: number | null;
  /** How far in the past other players are drawn, ms. Default 100. */
  interpolationDelayMs?: number;
  /** Commands per input message (the newest and the ones before, against loss), 1 to 4. Default 3. */
  redundancy?: number;
}

/** Where the game is, for the player: what to show instead of (or over) the arena. */
export type ArenaStatus =
  /** Asking for a seat, connecting, or waiting for the first snapshot. */
  | { state: "connecting"; reconnect: boolean }
  /** Snapshots are flowing. */
  | { state: "playing" }
  /** The connection ended; the next attempt starts in `retryInMs` (`null`: it has started). */
  | { state: "reconnecting"; reason: string; retryInMs: number | null }
  /** Nothing more will happen: `reason` says why (a kick, a shutdown, a refusal, a close). */
  | { state: "ended"; reason: string; message: string };

/** A chat line, with the sender's name as the roster knew it then. */
export interface ChatLine {
  from: EntityId;
  name: string;
  text: string;
  /** When it arrived (the client's clock, ms). */
  at: number;
  /** Sent by the local player. */
  mine: boolean;
}

/** A remote player where it is drawn: metres and radians, interpolated. */
export interface RemotePlayer {
  id: EntityId;
  name: string;
  x: number;
  y: number;
  aim: number;
  health: number;
  alive: boolean;
}

/** The local player: drawn where prediction puts it; `serverX`/`serverY` are the server's word. */
export interface LocalPlayer {
  id: EntityId;
  name: string;
  /** The predicted position, corrections smoothed, metres. */
  x: number;
  y: number;
  /** The exact position of the newest snapshot. */
  serverX: number;
  serverY: number;
  aim: number;
  health: number;
  alive: boolean;
  /** Ticks until the respawn while dead. */
  respawnIn: number;
  kills: number;
  deaths: number;
  score: number;
}

/** A bullet, metres and radians. */
export interface Bullet {
  x: number;
  y: number;
  direction: number;
  mine: boolean;
}

/** What to draw at one moment. */
export interface ArenaView {
  /** `null` until the first snapshot. */
  me: LocalPlayer | null;
  /** Everyone else in view, by id. */
  players: RemotePlayer[];
  bullets: Bullet[];
  /** The server tick the others are drawn at (fractional), or `null`. */
  renderTick: number | null;
}

/** Counters of things that went wrong and were survived. */
export interface ArenaProblems {
  /** Server messages that did not decode. */
  badMessages: number;
  /** Snapshots that did not decode or apply (an unknown baseline included). */
  badSnapshots: number;
  /** Snapshots that arrived before a welcome. */
  orphanSnapshots: number;
  /** Messages on a channel the arena does not use. */
  unknownChannel: number;
}

/** The events of an {@link ArenaClient}. */
export interface ArenaClientEvents {
  status: [status: ArenaStatus];
  /** A welcome: on joining and on every reconnection. */
  welcome: [welcome: Welcome];
  /** A snapshot was applied. `bytes` is its size on the wire. */
  snapshot: [snapshot: DecodedSnapshot, bytes: number];
  /** Every server message, after the client handled it. */
  message: [message: ServerMessage];
  chat: [line: ChatLine];
  /** A kill, names from the roster (`?` for a player who left). */
  kill: [kill: { killer: EntityId; victim: EntityId; killerName: string; victimName: string }];
  /** A hit the local player gave or took. */
  hit: [hit: { attacker: EntityId; victim: EntityId; damage: number; health: number }];
  announcement: [text: string];
  /** Something the server sent was wrong and dropped (see {@link ArenaClient.problems}). */
  problem: [description: string];
}

interface RemoteState {
  x: number;
  y: number;
  aim: number;
  health: number;
  alive: boolean;
}

function lerpRemote(from: RemoteState, to: RemoteState, t: number): RemoteState {
  const late = t >= 1 ? to : from;
  return {
    x: from.x + (to.x - from.x) * t,
    y: from.y + (to.y - from.y) * t,
    aim: lerpAngle(from.aim, to.aim, t),
    health: late.health,
    alive: late.alive,
  };
}

/** How many past snapshots' bullets are kept, to draw them at the interpolated tick. */
const BULLET_HISTORY = 64;
/** Longest chat log kept. */
const CHAT_LOG = 100;
/** Most inputs sent at once when ticks are overdue (after a stall, the rest are skipped). */
const MAX_CATCH_UP = 4;

/** The arena, client side. */
export class ArenaClient {
  /** The transport underneath (matchmaking, the WebSocket, reconnection, stats). */
  readonly client: TickwireClient;
  readonly map: ArenaMapInfo;
  private readonly clock: Clock;
  private readonly events = new Emitter<ArenaClientEvents>();
  private readonly interpolationDelayMs: number;
  private readonly redundancy: number;
  private welcomeValue: Welcome | null = null;
  private decoder: SnapshotDecoder | null = null;
  private prediction: Prediction | null = null;
  private interpolation: InterpolationBuffer<EntityId, RemoteState> | null = null;
  private bullets = new Map<number, BulletView[]>();
  private awaitingFirstSnapshot = true;
  private latest: DecodedSnapshot | null = null;
  private latestBytes = 0;
  private recent: InputCommand[] = [];
  private nextTickAt: number | null = null;
  private lastAim = 0;
  private readonly namesById = new Map<EntityId, string>();
  private scoresValue: Score[] = [];
  private readonly chatLog: ChatLine[] = [];
  private statusValue: ArenaStatus = { state: "connecting", reconnect: false };
  private readonly problemCounts: ArenaProblems = { badMessages: 0, badSnapshots: 0, orphanSnapshots: 0, unknownChannel: 0 };

  constructor(options: ArenaClientOptions) {
    const { map, name, request, interpolationDelayMs, redundancy, silenceTimeoutMs, ...rest } = options;
    this.map = map;
    this.clock = options.clock ?? systemClock;
    this.interpolationDelayMs = interpolationDelayMs ?? 100;
    this.redundancy = Math.min(4, Math.max(1, Math.trunc(redundancy ?? 3)));
    this.client = new TickwireClient({
      ...rest,
      request: request ?? { kind: "arena", ...(name !== undefined ? { name } : {}) },
      silenceTimeoutMs: silenceTimeoutMs === undefined ? 5000 : silenceTimeoutMs,
    });
    this.client.on("matched", (answer) => this.setStatus({ state: "connecting", reconnect: answer.reconnect }));
    this.client.on("connected", () => {
      // The welcome follows; until then nothing is sent.
      this.awaitingFirstSnapshot = true;
    });
    this.client.on("message", (channel, bytes) => this.handleMessage(channel, bytes));
    this.client.on("disconnected", (disconnect, retryInMs) => this.handleDisconnect(disconnect, retryInMs));
    this.client.on("matchmakeFailed", (error, retryInMs) => this.handleMatchmakeFailed(error, retryInMs));
    this.client.on("failed", (failure) => this.handleFailed(failure));
  }

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof ArenaClientEvents>(event: K, listener: (...args: ArenaClientEvents[K]) => void): () => void {
    return this.events.on(event, listener);
  }

  private emit<K extends keyof ArenaClientEvents>(event: K, ...args: ArenaClientEvents[K]): void {
    this.events.emit(event, ...args);
  }

  /** Matchmakes and connects. */
  start(): void {
    this.setStatus({ state: "connecting", reconnect: false });
    this.client.start();
  }

  /** Leaves the room for good. */
  close(): void {
    this.client.close();
    this.setStatus({ state: "ended", reason: "requested", message: "you left the game" });
  }

  /** Where the game is. */
  get status(): ArenaStatus {
    return this.statusValue;
  }

  /** The last welcome, or `null` before one. */
  get welcome(): Welcome | null {
    return this.welcomeValue;
  }

  /** The local player's entity id, or `null` before the welcome. */
  get you(): EntityId | null {
    return this.welcomeValue?.you ?? null;
  }

  /** Entity ids to names: the roster. */
  get names(): ReadonlyMap<EntityId, string> {
    return this.namesById;
  }

  /** The last scoreboard, best first. */
  get scores(): readonly Score[] {
    return this.scoresValue;
  }

  /** The chat so far (the last 100 lines), oldest first. */
  get chat(): readonly ChatLine[] {
    return this.chatLog;
  }

  /** The newest snapshot applied. */
  get snapshot(): DecodedSnapshot | null {
    return this.latest;
  }

  /** The size of the newest snapshot on the wire, bytes. */
  get snapshotBytes(): number {
    return this.latestBytes;
  }

  /** RTT, packets and bytes per second (see {@link ConnectionStats}). */
  get stats(): ConnectionStats {
    return this.client.stats;
  }

  /** What went wrong and was survived. */
  get problems(): Readonly<ArenaProblems> {
    return this.problemCounts;
  }

  /** A name for an entity id: the roster's, or `#id`. */
  nameOf(id: EntityId): string {
    return this.namesById.get(id) ?? `#${id}`;
  }

  /**
   * Sends a chat line (cut to 160 bytes). False when not connected or empty. The server
   * drops lines sent faster than its limit (two a second by default).
   */
  say(text: string): boolean {
    const line = truncateUtf8(text.trim(), MAX_CHAT_BYTES);
    if (line.length === 0 || this.welcomeValue === null) {
      return false;
    }
    return this.client.send(RELIABLE, encodeClientMessage({ type: "Chat", text: line }));
  }

  /**
   * Call every frame with what the player does: sends one input per server tick that has
   * come due since the last call (at most a few after a stall), predicting each.
   */
  update(now: number, input: LocalInput): void {
    const welcome = this.welcomeValue;
    const prediction = this.prediction;
    if (welcome === null || prediction === null || this.awaitingFirstSnapshot || this.client.state !== "connected") {
      this.nextTickAt = null;
      return;
    }
    this.lastAim = input.aim;
    const tickMs = 1000 / welcome.tickRateHz;
    // Ticks overdue past the catch-up allowance (a stall, a slow frame) are skipped.
    const earliest = now - tickMs * (MAX_CATCH_UP - 1);
    if (this.nextTickAt === null || this.nextTickAt < earliest) {
      this.nextTickAt = this.nextTickAt === null ? now : earliest;
    }
    // A dead player's movement would be predicted into a wall of corrections.
    const alive = this.latest?.me.alive ?? true;
    const effective: LocalInput = alive ? input : { ...input, moveX: 0, moveY: 0, buttons: input.buttons & ~FIRE };
    for (let sent = 0; now >= this.nextTickAt && sent < MAX_CATCH_UP; sent++) {
      this.sendInput(now, effective, prediction);
      this.nextTickAt += tickMs;
    }
  }

  private sendInput(now: number, input: LocalInput, prediction: Prediction): void {
    let command: InputCommand;
    try {
      command = prediction.handleLocalInput(now, input);
    } catch {
      // Values off the grids (NaN from a bad aim computation): send nothing this tick.
      return;
    }
    this.recent.unshift(command);
    this.recent.length = Math.min(this.recent.length, this.redundancy);
    try {
      this.client.send(INPUT, encodeClientInput({ ack: this.decoder?.newest ?? null, inputs: this.recent }));
    } catch {
      this.recent = [];
    }
  }

  /** What to draw at `now`: the predicted local player, the others interpolated, bullets. */
  view(now: number): ArenaView {
    const latest = this.latest;
    const schema = this.decoder?.schema ?? null;
    const interpolation = this.interpolation;
    const players: RemotePlayer[] = [];
    if (interpolation !== null) {
      for (const [id, state] of interpolation.sample(now)) {
        players.push({ id, name: this.nameOf(id), ...state });
      }
      players.sort((a, b) => a.id - b.id);
    }
    let me: LocalPlayer | null = null;
    const you = this.you;
    if (latest !== null && you !== null && schema !== null) {
      const drawn = this.prediction?.renderPosition(now) ?? { x: latest.me.x, y: latest.me.y };
      me = {
        id: you,
        name: this.nameOf(you),
        x: drawn.x,
        y: drawn.y,
        serverX: latest.me.x,
        serverY: latest.me.y,
        aim: this.lastAim,
        health: latest.me.health,
        alive: latest.me.alive,
        respawnIn: latest.me.respawnIn,
        kills: latest.me.kills,
        deaths: latest.me.deaths,
        score: latest.me.score,
      };
    }
    const renderTick = interpolation?.renderTick ?? null;
    const bullets: Bullet[] = [];
    if (schema !== null && latest !== null) {
      const tick = renderTick === null ? latest.tick : Math.floor(renderTick);
      for (const bullet of this.bulletsAt(tick) ?? latest.bullets) {
        const position = schema.position(bullet.x, bullet.y);
        bullets.push({ x: position.x, y: position.y, direction: schema.aim(bullet.direction), mine: bullet.mine });
      }
    }
    return { me, players, bullets, renderTick };
  }

  /** The bullets of the newest snapshot at or before `tick`. */
  private bulletsAt(tick: number): BulletView[] | null {
    let best: number | null = null;
    for (const held of this.bullets.keys()) {
      if (held <= tick && (best === null || held > best)) {
        best = held;
      }
    }
    return best === null ? null : this.bullets.get(best)!;
  }

  private setStatus(status: ArenaStatus): void {
    this.statusValue = status;
    this.emit("status", status);
  }

  private problem(description: string): void {
    this.emit("problem", description);
  }

  private handleMessage(channel: number, bytes: Uint8Array): void {
    if (channel === SNAPSHOT) {
      this.handleSnapshot(bytes);
    } else if (channel === RELIABLE) {
      let message: ServerMessage;
      try {
        message = decodeServerMessage(bytes);
      } catch (error) {
        this.problemCounts.badMessages += 1;
        this.problem(error instanceof DecodeError ? `bad server message: ${error.message}` : String(error));
        return;
      }
      this.handleServerMessage(message);
      this.emit("message", message);
    } else {
      this.problemCounts.unknownChannel += 1;
      this.problem(`a message on channel ${channel}`);
    }
  }

  private handleServerMessage(message: ServerMessage): void {
    const now = this.clock.now();
    switch (message.type) {
      case "Welcome":
        this.handleWelcome(message);
        return;
      case "Player":
        this.namesById.set(message.id, message.name);
        return;
      case "Left":
        this.namesById.delete(message.id);
        // Off the table now, not at the next scoreboard.
        this.scoresValue = this.scoresValue.filter((score) => score.id !== message.id);
        return;
      case "Scores":
        this.scoresValue = message.scores;
        return;
      case "Chat": {
        const line: ChatLine = {
          from: message.from,
          name: this.nameOf(message.from),
          text: message.text,
          at: now,
          mine: message.from === this.you,
        };
        this.chatLog.push(line);
        if (this.chatLog.length > CHAT_LOG) {
          this.chatLog.shift();
        }
        this.emit("chat", line);
        return;
      }
      case "Kill":
        this.emit("kill", {
          killer: message.killer,
          victim: message.victim,
          killerName: this.namesById.get(message.killer) ?? "?",
          victimName: this.namesById.get(message.victim) ?? "?",
        });
        return;
      case "Hit":
        this.emit("hit", message);
        return;
      case "Respawn":
      case "Teleported":
        // A jump, not a glide: prediction starts again where the server put the player.
        this.prediction?.reset({ x: message.x, y: message.y });
        return;
      case "Announcement":
        this.emit("announcement", message.text);
        return;
      case "Pong":
        return;
    }
  }

  private handleWelcome(welcome: Welcome): void {
    if (welcome.protocol !== PROTOCOL_VERSION) {
      this.problem(`the server speaks arena protocol ${welcome.protocol}, this client ${PROTOCOL_VERSION}`);
    }
    let schema: SnapshotSchema;
    try {
      schema = SnapshotSchema.fromWelcome(welcome);
    } catch (error) {
      this.problemCounts.badMessages += 1;
      this.problem(`unusable welcome: ${String(error)}`);
      return;
    }
    if (welcome.map !== this.map.name) {
      this.problem(`the server plays ${welcome.map}, the client loaded ${this.map.name}`);
    }
    const params: MovementParams = {
      radius: welcome.playerRadius,
      maxSpeed: welcome.maxSpeed,
      dt: tickSeconds(Math.max(1, welcome.tickRateHz)),
      bounds: { x: welcome.mapWidth, y: welcome.mapHeight },
    };
    const previous = this.welcomeValue;
    const sameRules =
      previous !== null &&
      previous.you === welcome.you &&
      previous.playerRadius === welcome.playerRadius &&
      previous.maxSpeed === welcome.maxSpeed &&
      previous.tickRateHz === welcome.tickRateHz &&
      previous.mapWidth === welcome.mapWidth &&
      previous.mapHeight === welcome.mapHeight;
    this.welcomeValue = welcome;
    // The server forgot every baseline: so does the client. The roster is sent again.
    this.decoder = new SnapshotDecoder(schema, welcome.snapshotHistory);
    this.interpolation = new InterpolationBuffer<EntityId, RemoteState>({
      tickRateHz: Math.max(1, welcome.tickRateHz),
      delayMs: this.interpolationDelayMs,
      lerp: lerpRemote,
    });
    this.bullets.clear();
    this.namesById.clear();
    this.recent = [];
    this.nextTickAt = null;
    this.awaitingFirstSnapshot = true;
    if (!sameRules || this.prediction === null) {
      // Kept across reconnections to the same avatar, so input sequences go on.
      this.prediction = new Prediction({
        params,
        walls: this.map.walls,
        position: { x: welcome.mapWidth / 2, y: welcome.mapHeight / 2 },
        stats: this.client.stats,
      });
    }
    this.emit("welcome", welcome);
  }

  private handleSnapshot(bytes: Uint8Array): void {
    const decoder = this.decoder;
    if (decoder === null) {
      this.problemCounts.orphanSnapshots += 1;
      return;
    }
    let snapshot: DecodedSnapshot;
    try {
      snapshot = decoder.decode(bytes);
    } catch (error) {
      this.problemCounts.badSnapshots += 1;
      // An unknown baseline is normal after a loss; the server falls back to a full one.
      if (!(error instanceof SnapshotError && error.kind === "unknown_baseline")) {
        this.problem(error instanceof Error ? error.message : String(error));
      }
      return;
    }
    const now = this.clock.now();
    const newest = decoder.newest === snapshot.tick;
    this.interpolation?.handleSnapshot(
      now,
      snapshot.tick,
      snapshot.entities.map((entity) => {
        const position = decoder.schema.position(entity.state.x, entity.state.y);
        const state: RemoteState = {
          x: position.x,
          y: position.y,
          aim: decoder.schema.aim(entity.state.aim),
          health: entity.state.health,
          alive: entity.state.alive,
        };
        return [entity.id, state] as const;
      }),
    );
    this.bullets.set(snapshot.tick, snapshot.bullets);
    if (this.bullets.size > BULLET_HISTORY) {
      let oldest: number | null = null;
      for (const tick of this.bullets.keys()) {
        oldest = oldest === null ? tick : Math.min(oldest, tick);
      }
      if (oldest !== null) {
        this.bullets.delete(oldest);
      }
    }
    if (!newest) {
      // A late snapshot: its view is kept as a baseline, but the player is not moved back.
      return;
    }
    this.latest = snapshot;
    this.latestBytes = bytes.length;
    const prediction = this.prediction;
    if (prediction !== null) {
      const position = { x: snapshot.me.x, y: snapshot.me.y };
      if (this.awaitingFirstSnapshot) {
        // Inputs continue after what the server applied last (a held seat keeps its avatar).
        const next = snapshot.lastInput === null ? undefined : (snapshot.lastInput + 1) & 0xffff;
        prediction.reset(position, next);
      } else {
        prediction.handleServerState(now, { position, lastInputSequence: snapshot.lastInput });
      }
    }
    if (this.awaitingFirstSnapshot) {
      this.awaitingFirstSnapshot = false;
      this.setStatus({ state: "playing" });
    }
    this.emit("snapshot", snapshot, bytes.length);
  }

  private handleDisconnect(disconnect: Disconnect, retryInMs: number | null): void {
    this.awaitingFirstSnapshot = true;
    this.nextTickAt = null;
    if (retryInMs !== null) {
      this.setStatus({ state: "reconnecting", reason: disconnect.reason, retryInMs });
    } else if (disconnect.reason === "requested") {
      this.setStatus({ state: "ended", reason: "requested", message: "you left the game" });
    }
  }

  private handleMatchmakeFailed(error: MatchmakeError, retryInMs: number | null): void {
    if (retryInMs !== null) {
      this.setStatus({ state: "reconnecting", reason: error.kind, retryInMs });
    }
  }

  private handleFailed(failure: ClientFailure): void {
    if (failure.kind === "matchmake") {
      this.setStatus({ state: "ended", reason: failure.error.kind, message: failure.error.message });
    } else {
      this.setStatus({ state: "ended", reason: failure.disconnect.reason, message: failure.disconnect.message });
    }
  }
}
