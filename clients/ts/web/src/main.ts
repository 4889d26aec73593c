// The arena in the browser: a name, then the game. The SDK's ArenaClient does the network
// (matchmaking, WebTransport or WebSocket, snapshots, prediction, interpolation,
// reconnection); `?transport=ws` or `?transport=wt` in the URL forces a transport. This file
// ties it to pixi.js, the keyboard and mouse, and the HUD, and tells the player in words
// whenever the game is not simply running.
import { type ArenaMapInfo, type ArenaStatus, type ArenaView, ArenaClient, MAX_NAME_BYTES, fetchArenaMap } from "@tickwire/arena";
import type { MatchmakeRequest, TransportChoice, TransportKind } from "@tickwire/client";

import { Hud } from "./hud.js";
import { Controls } from "./input.js";
import { showLeaderboard } from "./leaderboard.js";
import { Scene, playerColor } from "./render.js";

/** What the page exposes for tests and curious players (read-only copies, refreshed per frame). */
export interface DebugView {
  state: ArenaStatus["state"] | "idle";
  you: number | null;
  name: string | null;
  /** Drawn (predicted) and server-confirmed local position, metres. */
  me: { x: number; y: number; serverX: number; serverY: number; alive: boolean; health: number } | null;
  /** Every name in the room's roster, the local player's included (drawn or not). */
  roster: string[];
  /** The other players as drawn this frame. */
  players: { id: number; name: string; x: number; y: number; alive: boolean }[];
  chat: { name: string; text: string; mine: boolean }[];
  snapshots: number;
  snapshotBytes: number;
  /** Kills and hits the page was told of (kills go to everyone, hits to the two involved). */
  kills: number;
  hits: number;
  rttMs: number | null;
  frames: number;
  problems: number;
  /** The transport of the current (or last) connection. */
  transport: TransportKind | null;
  /** What the URL asked for: `auto` unless `?transport=ws|wt`. */
  transportChoice: TransportChoice;
  /** Why WebTransport was given up on, when the page fell back to WebSocket. */
  fallback: string | null;
  /** From starting the client to its first connection (matchmaking and any fallback included), ms. */
  connectMs: number | null;
  /**
   * Each other player in view by id: whether the newest snapshot moved it, and since when
   * that is so (the arrival of the snapshot that started or stopped it, ms since the epoch:
   * `performance.timeOrigin + performance.now()`, which the tabs of one browser share). Set
   * as each snapshot arrives rather than once per frame, so a test can time a move from one
   * tab to another.
   */
  motion: Record<number, { moving: boolean; since: number }>;
}

declare global {
  interface Window {
    __tickwire: DebugView;
  }
}

/** `?transport=ws` or `?transport=wt` forces a transport; without it the SDK prefers WebTransport. */
function transportFromUrl(): TransportChoice {
  const asked = new URLSearchParams(location.search).get("transport");
  return asked === "ws" ? "websocket" : asked === "wt" ? "webtransport" : "auto";
}

window.__tickwire = {
  transport: null,
  transportChoice: transportFromUrl(),
  fallback: null,
  connectMs: null,
  state: "idle",
  you: null,
  name: null,
  me: null,
  roster: [],
  players: [],
  chat: [],
  snapshots: 0,
  snapshotBytes: 0,
  kills: 0,
  hits: 0,
  rttMs: null,
  frames: 0,
  problems: 0,
  motion: {},
};

function $<T extends HTMLElement = HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (element === null) {
    throw new Error(`#${id} is missing from index.html`);
  }
  return element as T;
}

const SESSION_KEY = "tickwire.session";
const NAME_KEY = "tickwire.name";

const joinScreen = $("join");
const joinForm = $<HTMLFormElement>("join-form");
const nameInput = $<HTMLInputElement>("name");
const playButton = $<HTMLButtonElement>("play");
const joinError = $("join-error");
const leaderboardScreen = $("leaderboard");
let playing = false;

function route(): void {
  const board = location.hash === "#leaderboard";
  leaderboardScreen.hidden = !board;
  joinScreen.hidden = board || playing;
  if (board) {
    void showLeaderboard($("leaderboard-body"));
  }
}
window.addEventListener("hashchange", route);
$("hide-leaderboard").addEventListener("click", (event) => {
  event.preventDefault();
  history.pushState(null, "", location.pathname);
  route();
});
route();

nameInput.value = localStorage.getItem(NAME_KEY) ?? "";

joinForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const name = nameInput.value.trim();
  const bytes = new TextEncoder().encode(name).length;
  if (bytes === 0 || bytes > MAX_NAME_BYTES || /\p{Cc}/u.test(name)) {
    joinError.textContent = `A name is 1 to ${MAX_NAME_BYTES} bytes of printable text.`;
    return;
  }
  playButton.disabled = true;
  joinError.textContent = "";
  void join(name).catch((error: unknown) => {
    playButton.disabled = false;
    joinError.textContent = error instanceof Error ? error.message : String(error);
  });
});

async function join(name: string): Promise<void> {
  let map: ArenaMapInfo;
  try {
    map = await fetchArenaMap();
  } catch (error) {
    throw new Error(`Cannot load the map from the server: ${error instanceof Error ? error.message : String(error)}`);
  }
  let scene: Scene;
  try {
    scene = await Scene.create($("game"));
  } catch (error) {
    throw new Error(`This browser cannot draw the game (WebGL): ${String(error)}`);
  }
  localStorage.setItem(NAME_KEY, name);
  playing = true;
  joinScreen.hidden = true;
  scene.setMap(map);
  play(name, map, scene);
}

function play(name: string, map: ArenaMapInfo, scene: Scene): void {
  const hud = new Hud();
  hud.show();
  const controls = new Controls(scene.app.canvas);
  // A reload keeps the seat: the session of this tab, if it was this name's.
  const saved = sessionStorage.getItem(SESSION_KEY);
  const request: MatchmakeRequest =
    saved !== null && saved.startsWith(`${name}\n`)
      ? { session: saved.slice(name.length + 1), kind: "arena" }
      : { kind: "arena", name };
  const debug = window.__tickwire;
  const arena = new ArenaClient({ map, request, transport: debug.transportChoice });
  debug.name = name;

  let retryAt: number | null = null;
  let wasDisconnected = false;
  let welcomedAt = 0;
  let killedBy: string | null = null;
  let lastSnapshotAt = 0;
  let stalled = false;
  const rejoin = (): void => location.reload();

  arena.client.on("matched", (answer) => sessionStorage.setItem(SESSION_KEY, `${name}\n${answer.session}`));
  arena.client.on("connected", (_params, transport) => {
    debug.connectMs ??= performance.now() - startedAt;
    debug.transport = transport;
    hud.transport(transport, debug.fallback);
  });
  arena.client.on("fallback", (why) => {
    debug.fallback = `${why.reason}: ${why.message}`;
    hud.system(`WebTransport failed (${why.reason}); connecting over WebSocket`);
  });
  let shutdownSeen = false;
  arena.on("status", (status) => {
    debug.state = status.state;
    if (status.state === "playing") {
      shutdownSeen = false;
    } else if (status.state === "reconnecting" && status.reason === "server_shutdown") {
      shutdownSeen = true;
    }
    retryAt = status.state === "reconnecting" && status.retryInMs !== null ? performance.now() + status.retryInMs : null;
    if (status.state === "reconnecting" || status.state === "ended") {
      wasDisconnected = true;
    }
    if (status.state === "playing" && wasDisconnected) {
      wasDisconnected = false;
      hud.toast("Reconnected: your seat was kept");
      hud.system("reconnected");
    }
    if (status.state === "ended" && status.reason !== "requested") {
      controls.release();
      // A session this server no longer knows (a restart) would fail the Rejoin too.
      if (["unauthorized", "not_found", "bad_request", "kicked"].includes(status.reason)) {
        sessionStorage.removeItem(SESSION_KEY);
      }
    }
    const restart = shutdownSeen && !(status.state === "reconnecting" && status.reason === "server_shutdown");
    hud.status(status, retryAt, performance.now(), rejoin, restart);
  });
  arena.on("welcome", (welcome) => {
    welcomedAt = performance.now();
    scene.maxHealth = welcome.maxHealth;
    debug.you = welcome.you;
  });
  // Each other player's last server position, on the wire's grid.
  const lastSeen = new Map<number, { x: number; y: number }>();
  arena.on("snapshot", (snapshot) => {
    lastSnapshotAt = performance.now();
    debug.snapshots += 1;
    for (const { id, state } of snapshot.entities) {
      const last = lastSeen.get(id);
      const moving = last !== undefined && (last.x !== state.x || last.y !== state.y);
      if (debug.motion[id]?.moving !== moving) {
        debug.motion[id] = { moving, since: performance.timeOrigin + lastSnapshotAt };
      }
      lastSeen.set(id, { x: state.x, y: state.y });
    }
    for (const id of snapshot.destroyed) {
      lastSeen.delete(id);
      delete debug.motion[id];
    }
  });
  arena.on("chat", (line) => hud.chat(line));
  arena.on("kill", (kill) => {
    debug.kills += 1;
    const now = performance.now();
    const you = arena.you;
    hud.kill(kill.killerName, kill.victimName, kill.killer === you || kill.victim === you);
    scene.death(kill.victim, playerColor(kill.victim), now, kill.victim === you);
    if (kill.victim === you) {
      killedBy = kill.killer === you ? "yourself" : kill.killerName;
    }
  });
  arena.on("hit", (hit) => {
    debug.hits += 1;
    scene.hit(hit.victim, hit.damage, performance.now());
  });
  arena.on("announcement", (text) => {
    hud.toast(`📢 ${text}`);
    hud.system(`server: ${text}`);
  });
  arena.on("message", (message) => {
    // The roster comes right after a welcome; later entries are players joining.
    const settled = performance.now() - welcomedAt > 1000;
    if (message.type === "Player") {
      hud.namesChanged();
      if (settled && message.id !== arena.you) {
        hud.system(`${message.name} joined`);
      }
    } else if (message.type === "Left") {
      hud.namesChanged();
    }
  });
  arena.on("problem", (problem) => {
    debug.problems += 1;
    console.warn("tickwire:", problem);
  });

  // Chat: Enter to type, Enter to send, Escape to go back to the game.
  const chatForm = $<HTMLFormElement>("chat-form");
  const chatInput = $<HTMLInputElement>("chat-input");
  chatInput.addEventListener("focus", () => {
    controls.enabled = false;
    controls.release();
  });
  chatInput.addEventListener("blur", () => {
    controls.enabled = true;
  });
  chatForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = chatInput.value.trim();
    if (text.length > 0 && !arena.say(text)) {
      hud.system("not connected: the line was not sent");
    }
    chatInput.value = "";
    chatInput.blur();
  });
  window.addEventListener("keydown", (event) => {
    if (event.code === "Enter" && document.activeElement !== chatInput) {
      event.preventDefault();
      chatInput.focus();
    } else if (event.code === "Escape" && document.activeElement === chatInput) {
      chatInput.blur();
    } else if (event.code === "Tab") {
      event.preventDefault();
      document.body.classList.toggle("scores-wide");
    }
  });

  // Focus and visibility: say what is going on rather than leave a still picture.
  const focusOverlay = $("focus-overlay");
  window.addEventListener("blur", () => {
    focusOverlay.hidden = false;
  });
  window.addEventListener("focus", () => {
    focusOverlay.hidden = true;
  });
  scene.app.canvas.addEventListener("pointerdown", () => {
    focusOverlay.hidden = true;
  });
  let hiddenAt: number | null = null;
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      hiddenAt = performance.now();
      controls.release();
    } else if (hiddenAt !== null) {
      const away = (performance.now() - hiddenAt) / 1000;
      hiddenAt = null;
      if (away > 1) {
        hud.toast(`Welcome back: the game went on for ${away.toFixed(0)} s while this tab was hidden`);
      }
    }
  });
  // A draining server keeps its games running but takes no one new: say so while it lasts.
  // (The page leaves with the browser's own close, 1001, which keeps the seat for a reload.)
  const checkReady = async (): Promise<void> => {
    try {
      const response = await fetch("/readyz", { cache: "no-store" });
      const text = await response.text();
      hud.setNotice(
        response.status === 503 && text.includes("draining")
          ? "The server is draining for a restart: play on, but no one new can join."
          : null,
      );
    } catch {
      // Unreachable: the connection's banner says so, and this news is stale.
      hud.setNotice(null);
    }
  };
  setInterval(() => void checkReady(), 3000);

  const startedAt = performance.now();
  arena.start();

  let lastMe: { x: number; y: number } | null = null;
  const sendDueInputs = (): void => {
    const pointer = controls.pointerPosition;
    arena.update(performance.now(), controls.read(lastMe, scene.toWorld(pointer.x, pointer.y)));
  };
  // A key pressed or let go goes out with the inputs already due, not at the next frame: on
  // a page drawing a few frames a second that is most of a frame sooner. (Controls saw the
  // key first: its listeners were added first.)
  window.addEventListener("keydown", sendDueInputs);
  window.addEventListener("keyup", sendDueInputs);
  let lastHud = 0;
  let frames = 0;
  let fps = 0;
  let fpsSince = performance.now();
  scene.app.ticker.add((ticker) => {
    const now = performance.now();
    const pointer = controls.pointerPosition;
    const input = controls.read(lastMe, scene.toWorld(pointer.x, pointer.y));
    arena.update(now, input);
    const view: ArenaView = arena.view(now);
    lastMe = view.me;
    scene.draw(view, now, ticker.deltaMS);

    frames += 1;
    debug.frames += 1;
    if (now - fpsSince >= 1000) {
      fps = (frames * 1000) / (now - fpsSince);
      frames = 0;
      fpsSince = now;
    }
    // A silent server while "playing": say so instead of showing a still picture.
    const silentFor = now - lastSnapshotAt;
    if (arena.status.state === "playing" && lastSnapshotAt > 0 && silentFor > 1000) {
      stalled = true;
      hud.setBanner(`Waiting for the server… (no update for ${(silentFor / 1000).toFixed(1)} s)`);
    } else if (stalled && arena.status.state === "playing") {
      stalled = false;
      hud.setBanner(null);
    }
    if (now - lastHud > 250) {
      lastHud = now;
      const welcome = arena.welcome;
      const report = arena.stats.report(now);
      const delay = view.renderTick !== null && arena.snapshot !== null && welcome !== null
        ? ((arena.snapshot.tick - view.renderTick) * 1000) / welcome.tickRateHz
        : null;
      hud.stats(report, arena.snapshotBytes, fps, delay);
      hud.scoreboard(arena.scores, (id) => arena.nameOf(id), arena.you);
      if (welcome !== null) {
        hud.vitals(view.me, welcome.maxHealth, welcome.tickRateHz, killedBy);
      }
      if (view.me?.alive) {
        killedBy = null;
      }
      if (arena.status.state === "reconnecting") {
        hud.status(arena.status, retryAt, now, rejoin, shutdownSeen && arena.status.reason !== "server_shutdown");
      }
      debug.rttMs = report.rttMs;
      debug.roster = [...arena.names.values()];
    }
    debug.me =
      view.me === null
        ? null
        : { x: view.me.x, y: view.me.y, serverX: view.me.serverX, serverY: view.me.serverY, alive: view.me.alive, health: view.me.health };
    debug.players = view.players.map((p) => ({ id: p.id, name: p.name, x: p.x, y: p.y, alive: p.alive }));
    debug.chat = arena.chat.map((line) => ({ name: line.name, text: line.text, mine: line.mine }));
    debug.snapshotBytes = arena.snapshotBytes;
  });
}
