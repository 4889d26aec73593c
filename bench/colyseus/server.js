// Colyseus 0.18 playing tickwire's arena under seed 000's hobo load, for
// `tickwire bench hobo --transport ws --against colyseus` (issue 17). See README.md here
// for what the room reproduces and where it differs.
//
//   node server.js [--port 0] [--host 127.0.0.1] [--players-per-room 10] [--map FILE.tmx]
//
// Prints `listening http=HOST:PORT` on stdout once it accepts matchmaking requests.
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { Server, Room } = require("@colyseus/core");
const { WebSocketTransport } = require("@colyseus/ws-transport");
const { schema, t, MapSchema } = require("@colyseus/schema");

// tickwire_arena::WorldConfig's defaults (crates/arena/src/config.rs).
const TICK_HZ = 60;
const DT = 1 / TICK_HZ;
const PLAYER_RADIUS = 0.4;
const MAX_SPEED = 6; // m/s
const MAX_HEALTH = 100;
const FIRE_INTERVAL_TICKS = 8;
const BULLET_SPEED = 30; // m/s
const BULLET_RADIUS = 0.1;
const BULLET_DAMAGE = 20;
const BULLET_LIFETIME_TICKS = Math.ceil(30 / (BULLET_SPEED * DT)); // 30 m range
const RESPAWN_DELAY_TICKS = 180;
const SPAWN_JITTER = 0.5;
const SEPARATION_STIFFNESS = 0.5;
const MAX_PUSH = 0.2;
const IDLE_STOP_TICKS = 30;
const SCORE_PER_KILL = 10;
const SCORE_PER_HIT = 1;

function flag(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
}

// ---- The map: tickwire's Tiled file, read the way crates/arena/src/map.rs reads it ------

/** Walls (one tile = one metre), spawn points, teleport pads and their destinations. */
function loadMap(file) {
  const tmx = fs.readFileSync(file, "utf8");
  const attr = (tag, name) => Number(new RegExp(`<${tag}\\b[^>]*\\s${name}="([^"]+)"`).exec(tmx)[1]);
  const width = attr("map", "width");
  const height = attr("map", "height");
  const tile = attr("map", "tilewidth");
  const csv = /<data encoding="csv">([\s\S]*?)<\/data>/.exec(tmx)[1];
  const walls = Uint8Array.from(csv.split(",").map((cell) => (Number(cell.trim()) ? 1 : 0)));
  if (walls.length !== width * height) {
    throw new Error(`${file}: ${walls.length} tiles for a ${width}x${height} map`);
  }
  const objects = [];
  for (const match of tmx.matchAll(/<object\b([^>]*?)(\/>|>([\s\S]*?)<\/object>)/g)) {
    const get = (name) => (new RegExp(`\\s${name}="([^"]*)"`).exec(match[1]) || [])[1];
    const destination = /name="destination"[^>]*value="(\d+)"/.exec(match[3] || "");
    objects.push({
      id: get("id"),
      kind: get("class"),
      x: Number(get("x")) / tile,
      y: Number(get("y")) / tile,
      w: Number(get("width") || 0) / tile,
      h: Number(get("height") || 0) / tile,
      destination: destination && destination[1],
    });
  }
  const zones = new Map(objects.filter((o) => o.kind === "zone").map((o) => [o.id, o]));
  return {
    width,
    height,
    walls,
    spawns: objects.filter((o) => o.kind === "spawn"),
    teleports: objects
      .filter((o) => o.kind === "teleport" && zones.has(o.destination))
      .map((pad) => ({ pad, to: zones.get(pad.destination) })),
  };
}

const MAP = loadMap(
  flag("map", path.join(__dirname, "..", "..", "crates", "arena", "maps", "courtyard.tmx")),
);

function wallAt(tx, ty) {
  if (tx < 0 || ty < 0 || tx >= MAP.width || ty >= MAP.height) return true;
  return MAP.walls[ty * MAP.width + tx] === 1;
}

/** Pushes a circle at (x, y) out of every wall tile it overlaps; returns [x, y]. */
function outOfWalls(x, y, r) {
  for (let ty = Math.floor(y - r); ty <= Math.floor(y + r); ty++) {
    for (let tx = Math.floor(x - r); tx <= Math.floor(x + r); tx++) {
      if (!wallAt(tx, ty)) continue;
      const nx = Math.max(tx, Math.min(x, tx + 1));
      const ny = Math.max(ty, Math.min(y, ty + 1));
      const dx = x - nx;
      const dy = y - ny;
      const d2 = dx * dx + dy * dy;
      if (d2 >= r * r) continue;
      if (d2 > 1e-12) {
        const d = Math.sqrt(d2);
        x = nx + (dx / d) * r;
        y = ny + (dy / d) * r;
      } else {
        // The centre is inside the tile: out through the nearest face.
        const faces = [x - tx, tx + 1 - x, y - ty, ty + 1 - y];
        const nearest = faces.indexOf(Math.min(...faces));
        if (nearest === 0) x = tx - r;
        else if (nearest === 1) x = tx + 1 + r;
        else if (nearest === 2) y = ty - r;
        else y = ty + 1 + r;
      }
    }
  }
  return [x, y];
}

// ---- State: what every client's patch carries --------------------------------------------

const Player = schema(
  {
    x: t.float32(),
    y: t.float32(),
    angle: t.float32(),
    health: t.uint8(),
    score: t.uint16(),
    alive: t.boolean(),
  },
  "Player",
);

const Bullet = schema({ x: t.float32(), y: t.float32() }, "Bullet");

const HoboState = schema(
  {
    players: t.map(Player),
    bullets: t.map(Bullet),
  },
  "HoboState",
);

// ---- The room --------------------------------------------------------------------------

class HoboRoom extends Room {
  onCreate(options) {
    this.maxClients = Number(flag("players-per-room", options.capacity || 10));
    this.setState(new HoboState());
    this.patchRate = 1000 / TICK_HZ;
    this.tick = 0;
    this.nextBullet = 0;
    /** Per session: what the simulation keeps beside the synchronized state. */
    this.sim = new Map();
    /** Per bullet key: velocity, owner, ticks left. */
    this.flight = new Map();
    this.onMessage("input", (client, input) => this.handleInput(client, input));
    this.setSimulationInterval(() => this.step(), 1000 / TICK_HZ);
  }

  onJoin(client) {
    const player = new Player();
    this.spawn(player);
    this.state.players.set(client.sessionId, player);
    this.sim.set(client.sessionId, {
      client,
      moveX: 0,
      moveY: 0,
      fire: false,
      idleTicks: IDLE_STOP_TICKS,
      nextFireTick: 0,
      respawnTick: 0,
    });
  }

  onLeave(client) {
    this.state.players.delete(client.sessionId);
    this.sim.delete(client.sessionId);
  }

  /** `[sequence, move x, move y, aim, buttons]`, clamped like tickwire clamps its inputs. */
  handleInput(client, input) {
    const sim = this.sim.get(client.sessionId);
    const player = this.state.players.get(client.sessionId);
    if (!sim || !Array.isArray(input) || input.length < 5) return;
    const [, moveX, moveY, aim, buttons] = input.map(Number);
    if (![moveX, moveY, aim, buttons].every(Number.isFinite)) return;
    const length = Math.hypot(moveX, moveY);
    const scale = length > 1 ? 1 / length : 1;
    sim.moveX = moveX * scale;
    sim.moveY = moveY * scale;
    sim.idleTicks = 0;
    if (buttons & 1) sim.fire = true;
    player.angle = Math.max(-Math.PI, Math.min(Math.PI, aim));
  }

  spawn(player) {
    const at = MAP.spawns[Math.floor(Math.random() * MAP.spawns.length)];
    const jitter = () => (Math.random() * 2 - 1) * SPAWN_JITTER;
    [player.x, player.y] = outOfWalls(at.x + jitter(), at.y + jitter(), PLAYER_RADIUS);
    player.health = MAX_HEALTH;
    player.alive = true;
  }

  /** One fixed step, in the order of crates/arena/src/world.rs. */
  step() {
    const tick = ++this.tick;
    const players = this.state.players;

    // Respawns, then movement.
    for (const [id, player] of players) {
      const sim = this.sim.get(id);
      if (!player.alive) {
        if (tick >= sim.respawnTick) {
          this.spawn(player);
          sim.client.send("respawn", { x: player.x, y: player.y });
        }
        continue;
      }
      if (sim.idleTicks++ >= IDLE_STOP_TICKS) {
        sim.moveX = 0;
        sim.moveY = 0;
      }
      if (sim.moveX !== 0 || sim.moveY !== 0) {
        [player.x, player.y] = outOfWalls(
          player.x + sim.moveX * MAX_SPEED * DT,
          player.y + sim.moveY * MAX_SPEED * DT,
          PLAYER_RADIUS,
        );
      }
    }

    // Players push apart (half the overlap each, capped), then out of the walls again.
    const alive = [];
    for (const [id, player] of players) if (player.alive) alive.push([id, player]);
    const pushes = alive.map(() => [0, 0]);
    for (let i = 0; i < alive.length; i++) {
      for (let j = i + 1; j < alive.length; j++) {
        const a = alive[i][1];
        const b = alive[j][1];
        const dx = b.x - a.x;
        const dy = b.y - a.y;
        const d = Math.hypot(dx, dy);
        const overlap = 2 * PLAYER_RADIUS - d;
        if (overlap <= 0 || d < 1e-6) continue;
        const push = (SEPARATION_STIFFNESS * overlap) / 2 / d;
        pushes[i][0] -= dx * push;
        pushes[i][1] -= dy * push;
        pushes[j][0] += dx * push;
        pushes[j][1] += dy * push;
      }
    }
    alive.forEach(([, player], i) => {
      let [px, py] = pushes[i];
      const length = Math.hypot(px, py);
      if (length === 0) return;
      if (length > MAX_PUSH) {
        px *= MAX_PUSH / length;
        py *= MAX_PUSH / length;
      }
      [player.x, player.y] = outOfWalls(player.x + px, player.y + py, PLAYER_RADIUS);
    });

    // Teleport pads, then fire.
    for (const [id, player] of alive) {
      const sim = this.sim.get(id);
      for (const { pad, to } of MAP.teleports) {
        if (player.x >= pad.x && player.x < pad.x + pad.w && player.y >= pad.y && player.y < pad.y + pad.h) {
          player.x = to.x + Math.random() * to.w;
          player.y = to.y + Math.random() * to.h;
          sim.client.send("teleported", { x: player.x, y: player.y });
          break;
        }
      }
      if (sim.fire && tick >= sim.nextFireTick) {
        sim.nextFireTick = tick + FIRE_INTERVAL_TICKS;
        const key = String(this.nextBullet++);
        const bullet = new Bullet();
        bullet.x = player.x;
        bullet.y = player.y;
        this.state.bullets.set(key, bullet);
        this.flight.set(key, {
          owner: id,
          vx: Math.cos(player.angle) * BULLET_SPEED * DT,
          vy: Math.sin(player.angle) * BULLET_SPEED * DT,
          ticksLeft: BULLET_LIFETIME_TICKS,
        });
      }
      sim.fire = false;
    }

    // Bullets: swept against players (never the shooter) and walls; the first thing met
    // stops them.
    for (const [key, bullet] of this.state.bullets) {
      const flight = this.flight.get(key);
      let nearest = 1;
      let victim;
      for (const [id, player] of alive) {
        if (id === flight.owner || !player.alive) continue;
        const along = segmentCircle(bullet.x, bullet.y, flight.vx, flight.vy, player.x, player.y, PLAYER_RADIUS + BULLET_RADIUS);
        if (along !== undefined && along < nearest) {
          nearest = along;
          victim = [id, player];
        }
      }
      const wall = segmentWall(bullet.x, bullet.y, flight.vx, flight.vy);
      if (wall !== undefined && wall <= nearest) {
        this.removeBullet(key);
        continue;
      }
      if (victim) {
        this.hit(flight.owner, victim[0], victim[1]);
        this.removeBullet(key);
        continue;
      }
      bullet.x += flight.vx;
      bullet.y += flight.vy;
      if (--flight.ticksLeft <= 0) this.removeBullet(key);
    }
  }

  hit(attackerId, victimId, victim) {
    const attacker = this.state.players.get(attackerId);
    if (attacker) attacker.score += SCORE_PER_HIT;
    victim.health = Math.max(0, victim.health - BULLET_DAMAGE);
    const hit = { attacker: attackerId, victim: victimId, damage: BULLET_DAMAGE, health: victim.health };
    this.sim.get(victimId).client.send("hit", hit);
    this.sim.get(attackerId)?.client.send("hit", hit);
    if (victim.health === 0) {
      victim.alive = false;
      this.sim.get(victimId).respawnTick = this.tick + RESPAWN_DELAY_TICKS;
      if (attacker) attacker.score += SCORE_PER_KILL;
      this.broadcast("kill", { killer: attackerId, victim: victimId });
    }
  }

  removeBullet(key) {
    this.state.bullets.delete(key);
    this.flight.delete(key);
  }
}

/** Fraction along (x, y) + s·(dx, dy), s in [0, 1], where it first meets the circle. */
function segmentCircle(x, y, dx, dy, cx, cy, r) {
  const fx = x - cx;
  const fy = y - cy;
  const a = dx * dx + dy * dy;
  const b = 2 * (fx * dx + fy * dy);
  const c = fx * fx + fy * fy - r * r;
  if (c <= 0) return 0;
  const disc = b * b - 4 * a * c;
  if (a === 0 || disc < 0) return undefined;
  const s = (-b - Math.sqrt(disc)) / (2 * a);
  return s >= 0 && s <= 1 ? s : undefined;
}

/** Fraction along the segment where a bullet first enters a wall tile (sampled every 5 cm). */
function segmentWall(x, y, dx, dy) {
  const steps = Math.max(1, Math.ceil(Math.hypot(dx, dy) / 0.05));
  for (let i = 1; i <= steps; i++) {
    const s = i / steps;
    if (wallAt(Math.floor(x + dx * s), Math.floor(y + dy * s))) return s;
  }
  return undefined;
}

async function main() {
  const server = new Server({
    transport: new WebSocketTransport(),
    greet: false,
    gracefullyShutdown: true,
  });
  // Each bench room is created by its first bot with `{ room: index }`; the others join
  // that one (Colyseus' own matchmaking filter) once it exists.
  server.define("hobo", HoboRoom).filterBy(["room"]);
  const host = flag("host", "127.0.0.1");
  await server.listen(Number(flag("port", "0")), host);
  const { port } = server.transport.server.address();
  process.stdout.write(`listening http=${host}:${port}\n`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
