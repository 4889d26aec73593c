// Bot players for the end-to-end test: each an ArenaClient from the SDK over Node's `ws`
// WebSocket, wandering around a target point the test sets (players only see each other
// within the interest radius, 20 m), and, if asked, shooting at whoever is nearest.
import { type ArenaClient as ArenaClientType, type ArenaMapInfo, ArenaClient, FIRE } from "@tickwire/arena";
import type { WebSocketConstructor } from "@tickwire/client";
import WebSocket from "ws";

export interface Bot {
  name: string;
  arena: ArenaClientType;
  /** Where to wander around (metres); the map's centre at first. */
  target: { x: number; y: number };
  /** Shoot at the nearest player. */
  fire: boolean;
  stop(): void;
}

export interface BotOptions {
  /** `http://host:port` of the server. */
  baseUrl: string;
  map: ArenaMapInfo;
  name: string;
  /** Shoot at the nearest player. Default false. */
  fire?: boolean;
  /** Seed of the bot's wandering. */
  seed: number;
}

function random(seed: number): () => number {
  let a = seed | 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Starts a bot: it joins the arena and moves every tick until stopped. */
export function startBot(options: BotOptions): Bot {
  const url = new URL(options.baseUrl);
  const arena = new ArenaClient({
    map: options.map,
    name: options.name,
    baseUrl: options.baseUrl,
    page: { protocol: url.protocol, host: url.host },
    WebSocket: WebSocket as unknown as WebSocketConstructor,
  });
  const next = random(options.seed);
  let heading = next() * Math.PI * 2;
  let turnAt = 0;
  // Heading straight for the target can pin a bot against cover: when it has not come
  // closer for a while, it walks a random way for a moment before trying again.
  let progress = { at: 0, away: Number.POSITIVE_INFINITY };
  let detourUntil = 0;
  const bot: Bot = {
    name: options.name,
    arena,
    target: { x: options.map.width / 2, y: options.map.height / 2 },
    fire: options.fire ?? false,
    stop() {
      clearInterval(timer);
      arena.close();
    },
  };
  const timer = setInterval(() => {
    const now = performance.now();
    if (now >= turnAt) {
      heading = next() * Math.PI * 2;
      turnAt = now + 500 + next() * 1000;
    }
    const view = arena.view(now);
    let aim = heading;
    let buttons = 0;
    const me = view.me;
    if (me !== null) {
      // Towards the target when far from it, else a random walk around it.
      const away = Math.hypot(bot.target.x - me.x, bot.target.y - me.y);
      if (away > 5 && now >= progress.at + STUCK_AFTER_MS) {
        if (away > progress.away - 0.5) {
          heading = next() * Math.PI * 2;
          detourUntil = now + 400 + next() * 600;
        }
        progress = { at: now, away };
      }
      if (away > 5 && now >= detourUntil) {
        heading = Math.atan2(bot.target.y - me.y, bot.target.x - me.x) + (next() - 0.5) * 0.6;
      }
      const target = view.players.filter((p) => p.alive).sort((a, b) => dist(a, me) - dist(b, me))[0];
      if (target !== undefined && bot.fire) {
        aim = Math.atan2(target.y - me.y, target.x - me.x);
        buttons = FIRE;
      }
    }
    arena.update(now, {
      moveX: Math.round(Math.cos(heading) * 64) / 64,
      moveY: Math.round(Math.sin(heading) * 64) / 64,
      aim,
      buttons,
    });
  }, 1000 / 60);
  arena.start();
  return bot;
}

/** How long a bot may fail to come closer to its target before it detours. */
const STUCK_AFTER_MS = 750;

function dist(a: { x: number; y: number }, b: { x: number; y: number }): number {
  return Math.hypot(a.x - b.x, a.y - b.y);
}
