// The arena in a real browser: `tickwire serve` on free ports serving the built demo, two
// bots over WebSocket (the SDK in Node), and Debian's chromium driven by playwright-core
// (the page on WebSocket: `?transport=ws`; WebTransport has its own test).
// The page joins with a name; the test checks that the bots are drawn and move, that keys
// move the local player *on the server* (the snapshot's exact own position), that a chat
// line comes back, saves a screenshot to target/e2e/, then drains and stops the server and
// checks the page says so. Every wait polls a condition under a deadline.
//
// Needs: the demo built (`npm run build`), the binary built (`cargo build -p tickwire`, or
// TICKWIRE_BIN), /usr/bin/chromium (or CHROMIUM). `make test-e2e` does all of it.
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { type ArenaMapInfo, fetchArenaMap } from "@tickwire/arena";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { DebugView } from "../src/main.js";
import { type Bot, startBot } from "./bots.js";
import { ADMIN_TOKEN, artifacts, binary, chromiumPath, dist, openChromium, startServer, waitFor } from "./harness.js";

async function debugView(page: Page): Promise<DebugView> {
  return page.evaluate(() => structuredClone(window.__tickwire));
}

describe("the arena in chromium", () => {
  let scratch: string;
  let server: ChildProcess | undefined;
  let baseUrl: string;
  let adminUrl: string;
  let map: ArenaMapInfo;
  const bots: Bot[] = [];
  let context: BrowserContext | undefined;
  let page: Page;
  let consoleErrors: string[] = [];

  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true });
    expect(existsSync(join(dist, "index.html")), "the demo is built (npm run build in clients/ts/web)").toBe(true);
    expect(existsSync(binary), `the server binary ${binary} exists (cargo build -p tickwire)`).toBe(true);
    expect(existsSync(chromiumPath), `${chromiumPath} exists (apt-get install chromium)`).toBe(true);
    scratch = mkdtempSync(join(tmpdir(), "tickwire-e2e-"));
    // WebTransport on a free port (not the default 4433, which another server may hold); this
    // test plays over WebSocket (`?transport=ws`), webtransport.e2e.test.ts over WebTransport.
    ({ process: server, baseUrl, adminUrl } = await startServer(scratch, ["--wt", "127.0.0.1:0"]));
    map = await fetchArenaMap({ baseUrl });
    for (let i = 1; i <= 2; i++) {
      bots.push(startBot({ baseUrl, map, name: `bot-${i}`, seed: i }));
    }
    await waitFor("the bots to play", () => bots.every((bot) => bot.arena.status.state === "playing"));
    ({ context, page, consoleErrors } = await openChromium(scratch, { width: 1280, height: 800 }));
  });

  afterAll(async () => {
    await context?.close();
    for (const bot of bots) bot.stop();
    if (server !== undefined && server.exitCode === null) {
      const exited = new Promise((resolve) => server!.once("exit", resolve));
      server.kill("SIGTERM");
      await exited;
    }
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  it("joins, draws the others moving, moves on the server, chats, and looks like a game", async () => {
    try {
      await play();
    } catch (error) {
      // What the page showed and knew, for whoever reads the failure.
      await page.screenshot({ path: join(artifacts, "failure.png") }).catch(() => {});
      const view = await debugView(page).catch(() => null);
      writeFileSync(join(artifacts, "failure.json"), JSON.stringify({ view, consoleErrors }, null, 2));
      throw error;
    }
  });

  async function play(): Promise<void> {
    // The leaderboard page reads the persistence API (empty on a fresh database).
    await page.goto(`${baseUrl}/?transport=ws#leaderboard`);
    await page.waitForFunction(() => !/Loading/.test(document.getElementById("leaderboard-body")?.textContent ?? "Loading"), null, {
      timeout: 20_000,
    });
    expect(await page.textContent("#leaderboard-body")).toMatch(/No games finished yet|score/);
    await page.click("#hide-leaderboard");
    await page.waitForSelector("#join:not([hidden])");
    await page.fill("#name", "e2e-player");
    await page.click("#play");
    await page.waitForFunction(() => window.__tickwire.state === "playing", null, { timeout: 20_000 });
    expect((await debugView(page)).transport, "the URL asked for WebSocket").toBe("websocket");

    // The bots come over (players see each other within 20 m), are drawn by name, and move.
    const here = await waitFor("the local player", async () => (await debugView(page)).me ?? undefined);
    for (const bot of bots) bot.target = { x: here.serverX, y: here.serverY };
    // Bots walk to the player round cover; a loaded machine makes that slower.
    const first = await waitFor("both bots drawn", async () => {
      const view = await debugView(page);
      const drawn = view.players.filter((p) => p.name.startsWith("bot-"));
      return drawn.length === 2 ? drawn : undefined;
    }, 45_000);
    await waitFor("a bot to move on screen", async () => {
      const view = await debugView(page);
      return view.players.some((p) => {
        const before = first.find((b) => b.id === p.id);
        return before !== undefined && Math.hypot(p.x - before.x, p.y - before.y) > 0.5;
      });
    });

    // Keys move the player, and the server says so: its exact position in the snapshots.
    await page.click("#game canvas", { position: { x: 640, y: 400 } });
    const start = await waitFor("the local player", async () => (await debugView(page)).me ?? undefined);
    const key = start.serverX < map.width / 2 ? "KeyD" : "KeyA";
    const sign = key === "KeyD" ? 1 : -1;
    await page.keyboard.down(key);
    const moved = await waitFor(`the server to move the player with ${key}`, async () => {
      const me = (await debugView(page)).me;
      return me !== null && (me.serverX - start.serverX) * sign > 1.5 ? me : undefined;
    });
    await page.keyboard.up(key);
    expect(moved.alive).toBe(true);
    // Once the keys are up, the prediction settles on the server's position, bit for bit
    // (the same movement step on both sides) unless a bot is pushing.
    await waitFor("the prediction to settle on the server's position", async () => {
      const me = (await debugView(page)).me;
      return me !== null && Math.hypot(me.x - me.serverX, me.y - me.serverY) < 0.01;
    });

    // A chat line goes to the server and comes back, to the page and to a bot.
    await page.keyboard.press("Enter");
    await page.keyboard.type("hello from chromium");
    await page.keyboard.press("Enter");
    await waitFor("the chat line back from the server", async () =>
      (await debugView(page)).chat.some((line) => line.mine && line.text === "hello from chromium" && line.name === "e2e-player"),
    );
    await waitFor("a bot to hear the chat line", () =>
      bots[0]!.arena.chat.some((line) => line.text === "hello from chromium" && line.name === "e2e-player"),
    );

    // The bots open fire: a kill reaches everyone (hits only the two involved), and the
    // page draws the fight. Then the picture.
    for (const bot of bots) bot.fire = true;
    await waitFor("a kill", async () => (await debugView(page)).kills > 0, 60_000);
    const frames = (await debugView(page)).frames;
    await waitFor("a few more frames", async () => (await debugView(page)).frames > frames + 3);
    await page.screenshot({ path: join(artifacts, "arena.png") });

    const view = await debugView(page);
    expect(view.problems, "nothing the server sent was refused").toBe(0);
    expect(view.snapshotBytes).toBeGreaterThan(0);
    expect(consoleErrors, "no errors in the page's console").toEqual([]);

    // A drain: the page says the server takes no one new, and the game goes on.
    const drained = await fetch(`${adminUrl}/api/admin/drain`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(drained.status).toBe(200);
    await page.waitForSelector("#notice:not([hidden])", { timeout: 20_000 });
    expect(await page.textContent("#notice")).toContain("draining");
    expect((await debugView(page)).state).toBe("playing");

    // Then the shutdown: the page says so (and keeps drawing) instead of freezing.
    server!.kill("SIGTERM");
    await page.waitForFunction(() => /shutting down/.test(document.getElementById("banner-text")?.textContent ?? ""), null, {
      timeout: 20_000,
    });
    // Retries find no server: the page keeps saying why, and when it tries again.
    await page.waitForFunction(() => /server shut down/.test(document.getElementById("banner-text")?.textContent ?? ""), null, {
      timeout: 20_000,
    });
    const frames2 = (await debugView(page)).frames;
    await waitFor("frames after the shutdown", async () => (await debugView(page)).frames > frames2 + 2);
    await page.screenshot({ path: join(artifacts, "shutdown.png") });
  }
});
