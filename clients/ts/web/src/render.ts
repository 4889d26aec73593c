// The arena drawn with pixi.js: the map's floor, walls and teleports, players, bullets and
// short-lived effects, in metres scaled to pixels, with a camera that follows the player.
import type { ArenaMapInfo, ArenaView, Bullet, LocalPlayer, RemotePlayer } from "@tickwire/arena";
import { Application, Container, Graphics, Text } from "pixi.js";

/** Pixels per metre at zoom 1 (the Tiled maps use 32 px tiles of 1 m). */
const TILE_PX = 32;
const PLAYER_RADIUS = 0.4;

/** A colour per entity id, spread around the hue circle. */
export function playerColor(id: number): number {
  const hue = (id * 137.508) % 360;
  return hslToRgb(hue / 360, 0.65, 0.58);
}

function hslToRgb(h: number, s: number, l: number): number {
  const k = (n: number): number => (n + h * 12) % 12;
  const a = s * Math.min(l, 1 - l);
  const f = (n: number): number => l - a * Math.max(-1, Math.min(k(n) - 3, Math.min(9 - k(n), 1)));
  return (Math.round(f(0) * 255) << 16) | (Math.round(f(8) * 255) << 8) | Math.round(f(4) * 255);
}

export function cssColor(color: number): string {
  return `#${color.toString(16).padStart(6, "0")}`;
}

/** Whether WebGL runs on the CPU (SwiftShader, llvmpipe): a GPU-less machine or a headless browser. */
function softwareRenderer(): boolean {
  const canvas = document.createElement("canvas");
  const gl = canvas.getContext("webgl2") ?? canvas.getContext("webgl");
  if (gl === null) {
    return false;
  }
  const info = gl.getExtension("WEBGL_debug_renderer_info");
  const renderer = String(gl.getParameter(info === null ? gl.RENDERER : info.UNMASKED_RENDERER_WEBGL));
  gl.getExtension("WEBGL_lose_context")?.loseContext();
  return /swiftshader|llvmpipe|softpipe|software/i.test(renderer);
}

interface Sprite {
  root: Container;
  body: Graphics;
  label: Text;
  health: Graphics;
  flashUntil: number;
}

interface Particle {
  g: Graphics;
  vx: number;
  vy: number;
  born: number;
  life: number;
}

/** The pixi scene; {@link Scene.draw} once per frame. */
export class Scene {
  readonly app: Application;
  private readonly world = new Container();
  private readonly bulletLayer = new Graphics();
  private readonly playerLayer = new Container();
  private readonly effectLayer = new Container();
  private readonly sprites = new Map<number, Sprite>();
  private readonly particles: Particle[] = [];
  private readonly floaters: { text: Text; born: number }[] = [];
  private scale = TILE_PX;
  /** Health at spawn, from the welcome. */
  maxHealth = 100;
  private shakeUntil = 0;
  private map: ArenaMapInfo | null = null;
  /** Where each player was drawn last frame (for effects at a victim's place). */
  private readonly drawn = new Map<number, { x: number; y: number }>();

  private constructor(app: Application) {
    this.app = app;
    this.world.addChild(this.bulletLayer, this.playerLayer, this.effectLayer);
    app.stage.addChild(this.world);
  }

  static async create(host: HTMLElement): Promise<Scene> {
    const app = new Application();
    // Multisampling doubles the cost of a frame on a software renderer (no GPU): skip it there.
    await app.init({ resizeTo: window, background: "#171a21", antialias: !softwareRenderer(), preference: "webgl" });
    host.appendChild(app.canvas);
    return new Scene(app);
  }

  /** Builds the static map layer (floor grid, walls as tiles, teleports). */
  setMap(map: ArenaMapInfo): void {
    this.map = map;
    const floor = new Graphics();
    floor.rect(0, 0, map.width, map.height).fill({ color: 0x262b35 });
    // A 1 m grid: the map's tiles.
    for (let x = 0; x <= map.width; x++) {
      floor.moveTo(x, 0).lineTo(x, map.height);
    }
    for (let y = 0; y <= map.height; y++) {
      floor.moveTo(0, y).lineTo(map.width, y);
    }
    floor.stroke({ width: 0.02, color: 0x323846 });
    for (const teleport of map.teleports) {
      const d = teleport.destination;
      floor.rect(d.minX, d.minY, d.maxX - d.minX, d.maxY - d.minY).fill({ color: 0x4fd1c5, alpha: 0.06 });
      floor.rect(d.minX, d.minY, d.maxX - d.minX, d.maxY - d.minY).stroke({ width: 0.05, color: 0x4fd1c5, alpha: 0.35 });
      const p = teleport.pad;
      floor.rect(p.minX, p.minY, p.maxX - p.minX, p.maxY - p.minY).fill({ color: 0x4fd1c5, alpha: 0.35 });
      floor.rect(p.minX + 0.2, p.minY + 0.2, p.maxX - p.minX - 0.4, p.maxY - p.minY - 0.4).stroke({ width: 0.08, color: 0xb2f5ea });
    }
    const walls = new Graphics();
    for (const w of map.walls) {
      walls.rect(w.minX, w.minY, w.maxX - w.minX, w.maxY - w.minY).fill({ color: 0x4a5568 });
    }
    // Tile edges and a top highlight, so the merged boxes read as the map's tiles.
    for (const w of map.walls) {
      for (let x = Math.ceil(w.minX); x < w.maxX; x++) {
        walls.moveTo(x, w.minY).lineTo(x, w.maxY);
      }
      for (let y = Math.ceil(w.minY); y < w.maxY; y++) {
        walls.moveTo(w.minX, y).lineTo(w.maxX, y);
      }
    }
    walls.stroke({ width: 0.04, color: 0x2d3748 });
    for (const w of map.walls) {
      walls.rect(w.minX, w.minY, w.maxX - w.minX, w.maxY - w.minY).stroke({ width: 0.06, color: 0x718096 });
    }
    this.world.addChildAt(floor, 0);
    this.world.addChildAt(walls, 1);
  }

  /** A hit on `victim`: a flash and the damage floating up. */
  hit(victim: number, damage: number, now: number): void {
    const sprite = this.sprites.get(victim);
    if (sprite !== undefined) {
      sprite.flashUntil = now + 150;
    }
    const at = this.drawn.get(victim);
    if (at !== undefined) {
      const text = new Text({ text: `-${damage}`, style: { fontFamily: "system-ui", fontSize: 28, fontWeight: "700", fill: 0xff6b6b } });
      text.anchor.set(0.5);
      text.scale.set(1 / TILE_PX);
      text.position.set(at.x, at.y - 0.9);
      this.effectLayer.addChild(text);
      this.floaters.push({ text, born: now });
    }
  }

  /** A death at `victim`'s place: a burst of particles (and a shake if it was us). */
  death(victim: number, color: number, now: number, local: boolean): void {
    const at = this.drawn.get(victim);
    if (at === undefined) {
      return;
    }
    for (let i = 0; i < 18; i++) {
      const angle = (i / 18) * Math.PI * 2 + Math.random() * 0.3;
      const speed = 2 + Math.random() * 4;
      const g = new Graphics().circle(0, 0, 0.08 + Math.random() * 0.08).fill({ color: i % 3 === 0 ? 0xffffff : color });
      g.position.set(at.x, at.y);
      this.effectLayer.addChild(g);
      this.particles.push({ g, vx: Math.cos(angle) * speed, vy: Math.sin(angle) * speed, born: now, life: 500 + Math.random() * 300 });
    }
    if (local) {
      this.shakeUntil = now + 300;
    }
  }

  draw(view: ArenaView, now: number, dt: number): void {
    const alive = new Set<number>();
    for (const player of view.players) {
      alive.add(player.id);
      this.drawPlayer(player, false, now);
    }
    if (view.me !== null) {
      alive.add(view.me.id);
      this.drawPlayer(view.me, true, now);
    }
    for (const [id, sprite] of this.sprites) {
      if (!alive.has(id)) {
        sprite.root.destroy({ children: true });
        this.sprites.delete(id);
        this.drawn.delete(id);
      }
    }
    this.drawBullets(view.bullets);
    this.animateEffects(now, dt);
    this.moveCamera(view.me, now);
  }

  private drawPlayer(player: RemotePlayer | LocalPlayer, local: boolean, now: number): void {
    let sprite = this.sprites.get(player.id);
    if (sprite === undefined) {
      const root = new Container();
      const body = new Graphics();
      const health = new Graphics();
      const label = new Text({
        text: player.name,
        style: { fontFamily: "system-ui", fontSize: 26, fontWeight: "600", fill: 0xffffff, stroke: { color: 0x000000, width: 4 } },
      });
      label.anchor.set(0.5, 1);
      label.scale.set(1 / TILE_PX / 1.4);
      label.position.set(0, -PLAYER_RADIUS - 0.25);
      root.addChild(body, health, label);
      this.playerLayer.addChild(root);
      sprite = { root, body, label, health, flashUntil: 0 };
      this.sprites.set(player.id, sprite);
    }
    if (sprite.label.text !== player.name) {
      sprite.label.text = player.name;
    }
    const color = playerColor(player.id);
    const flash = now < sprite.flashUntil;
    const body = sprite.body;
    body.clear();
    body.rotation = player.aim;
    // The gun, then the body over it.
    body.roundRect(0.1, -0.09, PLAYER_RADIUS + 0.32, 0.18, 0.05).fill({ color: 0xcbd5e0 });
    body.circle(0, 0, PLAYER_RADIUS).fill({ color: flash ? 0xffffff : color });
    body.circle(0, 0, PLAYER_RADIUS).stroke({ width: local ? 0.09 : 0.05, color: local ? 0xffffff : 0x10131a });
    body.alpha = player.alive ? 1 : 0.25;
    sprite.root.position.set(player.x, player.y);
    this.drawn.set(player.id, { x: player.x, y: player.y });
    const health = sprite.health;
    health.clear();
    if (player.alive) {
      const fraction = Math.max(0, Math.min(1, player.health / this.maxHealth));
      health.rect(-0.45, PLAYER_RADIUS + 0.12, 0.9, 0.1).fill({ color: 0x000000, alpha: 0.6 });
      health.rect(-0.45, PLAYER_RADIUS + 0.12, 0.9 * fraction, 0.1).fill({ color: fraction > 0.35 ? 0x48bb78 : 0xf56565 });
    }
    sprite.label.alpha = player.alive ? 1 : 0.4;
  }

  private drawBullets(bullets: readonly Bullet[]): void {
    const g = this.bulletLayer;
    g.clear();
    for (const bullet of bullets) {
      const tx = bullet.x - Math.cos(bullet.direction) * 0.5;
      const ty = bullet.y - Math.sin(bullet.direction) * 0.5;
      g.moveTo(tx, ty).lineTo(bullet.x, bullet.y).stroke({ width: 0.08, color: bullet.mine ? 0xfefcbf : 0xfbd38d, alpha: 0.5 });
      g.circle(bullet.x, bullet.y, 0.1).fill({ color: bullet.mine ? 0xfffff0 : 0xf6ad55 });
    }
  }

  private animateEffects(now: number, dt: number): void {
    for (let i = this.particles.length - 1; i >= 0; i--) {
      const p = this.particles[i]!;
      const age = now - p.born;
      if (age > p.life) {
        p.g.destroy();
        this.particles.splice(i, 1);
        continue;
      }
      p.g.position.x += (p.vx * dt) / 1000;
      p.g.position.y += (p.vy * dt) / 1000;
      p.vx *= 0.92;
      p.vy *= 0.92;
      p.g.alpha = 1 - age / p.life;
    }
    for (let i = this.floaters.length - 1; i >= 0; i--) {
      const f = this.floaters[i]!;
      const age = now - f.born;
      if (age > 800) {
        f.text.destroy();
        this.floaters.splice(i, 1);
        continue;
      }
      f.text.position.y -= (0.8 * dt) / 1000;
      f.text.alpha = 1 - age / 800;
    }
  }

  private moveCamera(me: LocalPlayer | null, now: number): void {
    const map = this.map;
    if (map === null) {
      return;
    }
    const width = this.app.screen.width;
    const height = this.app.screen.height;
    // The whole of a small map when it fits at a readable size, clear of the HUD's top and
    // bottom rows; else follow the player at 32 px/m.
    const fit = Math.min((width - 40) / map.width, (height - 180) / map.height);
    this.scale = fit >= 14 ? Math.min(fit, 48) : TILE_PX;
    const s = this.scale;
    let cx = map.width / 2;
    let cy = map.height / 2;
    if (map.width * s > width && me !== null) {
      cx = Math.min(Math.max(me.x, width / s / 2), map.width - width / s / 2);
    }
    if (map.height * s > height && me !== null) {
      cy = Math.min(Math.max(me.y, height / s / 2), map.height - height / s / 2);
    }
    let shakeX = 0;
    let shakeY = 0;
    if (now < this.shakeUntil) {
      shakeX = (Math.random() - 0.5) * 8;
      shakeY = (Math.random() - 0.5) * 8;
    }
    this.world.scale.set(s);
    this.world.position.set(width / 2 - cx * s + shakeX, height / 2 - cy * s + shakeY);
  }

  /** A point on the screen (CSS pixels) in metres. */
  toWorld(screenX: number, screenY: number): { x: number; y: number } {
    return {
      x: (screenX - this.world.position.x) / this.scale,
      y: (screenY - this.world.position.y) / this.scale,
    };
  }
}
