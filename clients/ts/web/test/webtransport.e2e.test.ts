// WebTransport in a real browser (issue 9): `tickwire serve` with its WebTransport endpoint
// on a free UDP port (a self-signed certificate the page accepts by its hash, from
// matchmaking), UDP bots from `tickwire bots`, and Debian's chromium with QUIC on.
//
// 1. A page connects over WebTransport, plays (keys move it on the server), and datagrams
//    flow both ways: the server's tickwire_wt_datagrams_{received,sent}_total grow.
// 2. A mixed room: that page, a page forced onto WebSocket (`?transport=ws`) and UDP bots
//    (`tickwire bots --transport udp`) all in one room's roster; chat lines cross between the
//    two pages both ways.
// 3. Fallback: matchmaking (rewritten in flight) points the page at a UDP port where nothing
//    listens, then at one that swallows every packet; each time the page falls back to
//    WebSocket with a fresh token and plays, within seconds.
// 4. A page opened at http://localhost:<port>, as the README says, plays over WebTransport.
// 5. Shutdown: SIGTERM, and the page on WebTransport says the server is shutting down (the
//    4003 CLOSE frame on its control stream got out before the QUIC endpoint closed).
//
// Needs what arena.e2e.test.ts needs. Every wait polls a condition under a deadline.
import { type ChildProcess, spawn } from "node:child_process";
import { createSocket } from "node:dgram";
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { fetchArenaMap } from "@tickwire/arena";
import { type Browser, type BrowserContext, type Page, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { DebugView } from "../src/main.js";
import { CHROMIUM_ARGS, type Server, artifacts, binary, chromiumPath, dist, serverHasWebTransport, startServer, stop, waitFor } from "./harness.js";

const BOTS = 3;
const VIEWPORT = { width: 800, height: 500 };
const CENTRE = { x: VIEWPORT.width / 2, y: VIEWPORT.height / 2 };


async function debugView(page: Page): Promise<DebugView> {
  return page.evaluate(() => structuredClone(window.__tickwire));
}

/** The server's Prometheus counters, summed over labels: `name` → value. */
/** `/metrics` on the operator listener `adminUrl`. */
async function metrics(adminUrl: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    const match = /^([a-z_]+)(?:\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (match !== null) {
      values.set(match[1]!, (values.get(match[1]!) ?? 0) + Number(match[2]));
    }
  }
  return values;
}

/** A UDP port nothing listens on: bound, then released. */
async function closedUdpPort(): Promise<number> {
  const socket = createSocket("udp4");
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  const { port } = socket.address();
  await new Promise<void>((resolve) => socket.close(() => resolve()));
  return port;
}

describe.skipIf(!serverHasWebTransport)("WebTransport in chromium", () => {
  let scratch: string;
  let server: Server | undefined;
  let bots: ChildProcess | undefined;
  let browser: Browser | undefined;
  const contexts: BrowserContext[] = [];
  const consoleErrors: string[] = [];
  let wtPage: Page;

  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true });
    expect(existsSync(join(dist, "index.html")), "the demo is built (npm run build in clients/ts/web)").toBe(true);
    expect(existsSync(binary), `the server binary ${binary} exists (cargo build -p tickwire)`).toBe(true);
    expect(existsSync(chromiumPath), `${chromiumPath} exists (apt-get install chromium)`).toBe(true);
    scratch = mkdtempSync(join(tmpdir(), "tickwire-wt-e2e-"));
    server = await startServer(scratch, ["--wt", "127.0.0.1:0"], "server-wt.log");
    browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: CHROMIUM_ARGS });
  });

  afterAll(async () => {
    for (const context of contexts) await context.close().catch(() => {});
    await browser?.close();
    await stop(bots);
    await stop(server?.process);
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  /** UDP bots in the arena's one room (join-or-create by kind), playing for longer than the test. */
  function startUdpBots(): ChildProcess {
    const log = createWriteStream(join(artifacts, "bots-udp.log"));
    const child = spawn(
      binary,
      ["bots", "--server", server!.baseUrl, "--scenario", "arena", "--transport", "udp", "--players", String(BOTS), "--rooms", "1"]
        .concat(["--warmup", "0s", "--duration", "600s"]),
      { cwd: scratch, stdio: ["ignore", "pipe", "pipe"] },
    );
    child.stdout!.pipe(log);
    child.stderr!.pipe(log);
    return child;
  }

  /** A page in its own browser window (so none is a background tab), its errors collected. */
  async function newPage(label: string): Promise<Page> {
    // Smaller than the arena test's: several pages draw at once on a software renderer, and a
    // page whose main thread is starved reads its datagrams late (they queue, see the README).
    const context = await browser!.newContext({ viewport: { width: VIEWPORT.width, height: VIEWPORT.height } });
    contexts.push(context);
    const page = await context.newPage();
    page.on("console", (message) => {
      if (message.type() === "error") consoleErrors.push(`${label}: ${message.text()}`);
    });
    page.on("pageerror", (error) => consoleErrors.push(`${label}: ${String(error)}`));
    return page;
  }

  async function enter(page: Page, path: string, name: string): Promise<void> {
    await page.goto(`${server!.baseUrl}${path}`);
    await page.fill("#name", name);
    await page.click("#play");
    await page.waitForFunction(() => window.__tickwire.state === "playing", null, { timeout: 20_000 });
  }

  /** Runs `body`; on failure saves what the pages showed and knew to target/e2e/. */
  async function recorded(name: string, pages: () => Page[], body: () => Promise<void>): Promise<void> {
    try {
      await body();
    } catch (error) {
      const views = [];
      for (const [i, page] of pages().entries()) {
        await page.screenshot({ path: join(artifacts, `${name}-failure-${i}.png`) }).catch(() => {});
        views.push(await debugView(page).catch(() => null));
      }
      writeFileSync(join(artifacts, `${name}-failure.json`), JSON.stringify({ views, consoleErrors }, null, 2));
      throw error;
    }
  }

  it("plays over WebTransport, its datagrams flowing both ways", async () => {
    wtPage = await newPage("wt");
    await recorded("wt", () => [wtPage], async () => {
      const before = await metrics(server!.adminUrl);
      await enter(wtPage, "/", "wt-player");
      const view = await debugView(wtPage);
      expect(view.transport, `the page connected over ${view.transport} (fallback: ${view.fallback})`).toBe("webtransport");
      await waitFor("the HUD to say WebTransport", async () => (await wtPage.textContent("#netstats"))?.includes("WebTransport"));

      // Keys move the player on the server: inputs went out as datagrams, snapshots came back.
      await wtPage.click("#game canvas", { position: CENTRE });
      const start = await waitFor("the local player", async () => (await debugView(wtPage)).me ?? undefined);
      const map = await fetchArenaMap({ baseUrl: server!.baseUrl });
      const key = start.serverX < map.width / 2 ? "KeyD" : "KeyA";
      const sign = key === "KeyD" ? 1 : -1;
      await wtPage.keyboard.down(key);
      await waitFor(`the server to move the player with ${key}`, async () => {
        const me = (await debugView(wtPage)).me;
        return me !== null && (me.serverX - start.serverX) * sign > 1.5;
      });
      await wtPage.keyboard.up(key);

      // 60 inputs and 60 snapshots a second: a second of play is far past these.
      const after = await waitFor("datagrams both ways on the server's counters", async () => {
        const now = await metrics(server!.adminUrl);
        const received = (now.get("tickwire_wt_datagrams_received_total") ?? 0) - (before.get("tickwire_wt_datagrams_received_total") ?? 0);
        const sent = (now.get("tickwire_wt_datagrams_sent_total") ?? 0) - (before.get("tickwire_wt_datagrams_sent_total") ?? 0);
        return received >= 30 && sent >= 30 ? now : undefined;
      });
      const delta = (name: string): number => (after.get(name) ?? 0) - (before.get(name) ?? 0);
      console.log(
        `webtransport: datagrams received ${delta("tickwire_wt_datagrams_received_total")}, sent ${delta("tickwire_wt_datagrams_sent_total")}; ` +
          `stream frames received ${delta("tickwire_wt_stream_frames_received_total")}, sent ${delta("tickwire_wt_stream_frames_sent_total")}`,
      );
      expect(after.get("tickwire_wt_sessions_open"), "one WebTransport session open").toBe(1);
      expect((await debugView(wtPage)).problems, "nothing the server sent was refused").toBe(0);
      await wtPage.screenshot({ path: join(artifacts, "webtransport.png") });

      // A reload drops the session without a CLOSE frame: a lost connection, so the seat is
      // held, and the reloaded tab's session takes it back over a new WebTransport session.
      const you = (await debugView(wtPage)).you;
      await wtPage.reload();
      await wtPage.waitForSelector("#join:not([hidden])");
      const answer = wtPage.waitForResponse("**/api/matchmake");
      await wtPage.click("#play");
      expect(((await (await answer).json()) as { reconnect: boolean }).reconnect, "the held seat came back").toBe(true);
      await wtPage.waitForFunction(() => window.__tickwire.state === "playing", null, { timeout: 20_000 });
      const back = await debugView(wtPage);
      expect(back.transport).toBe("webtransport");
      expect(back.you, "the same entity: the seat was kept").toBe(you);
      await waitFor("one WebTransport session open again", async () => (await metrics(server!.adminUrl)).get("tickwire_wt_sessions_open") === 1);
    });
  });

  it("shares a room with a WebSocket page and UDP bots", async () => {
    // The bots come now: they shoot, and the first test wants its player alive.
    bots = startUdpBots();
    const wsPage = await newPage("ws");
    await recorded("mixed", () => [wtPage, wsPage], async () => {
      const t0 = Date.now();
      const mark = (what: string): void => console.log(`mixed room: ${what} at ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      await enter(wsPage, "/?transport=ws", "ws-player");
      mark("the WebSocket page plays");
      expect((await debugView(wsPage)).transport).toBe("websocket");
      await waitFor("the HUD to say WebSocket", async () => (await wsPage.textContent("#netstats"))?.includes("WebSocket"));

      const botNames = Array.from({ length: BOTS }, (_, i) => `bot${i}`);
      for (const [page, other] of [
        [wtPage, "ws-player"],
        [wsPage, "wt-player"],
      ] as const) {
        await waitFor(`${other} and the UDP bots in the roster of the other page`, async () => {
          const roster = (await debugView(page)).roster;
          return [other, ...botNames].every((name) => roster.includes(name));
        });
      }
      mark("each page has the other and the bots in its roster");

      // Chat crosses both ways: the WebTransport page's reliable stream, out and in.
      for (const [from, to, text] of [
        [wtPage, wsPage, "hello over webtransport"],
        [wsPage, wtPage, "hello over websocket"],
      ] as const) {
        // Typed in one go: three pages drawing on a software renderer make each key slow.
        await from.fill("#chat-input", text);
        await from.press("#chat-input", "Enter");
        await waitFor(`"${text}" to reach the other page`, async () =>
          (await debugView(to)).chat.some((line) => !line.mine && line.text === text),
        );
        mark(`"${text}" crossed`);
      }
      const metricsNow = await metrics(server!.adminUrl);
      expect(metricsNow.get("tickwire_wt_sessions_open"), "still one WebTransport session: the WebSocket page did not use it").toBe(1);
      expect(consoleErrors, "no errors in the pages' consoles").toEqual([]);
      await wsPage.screenshot({ path: join(artifacts, "mixed-ws.png") });
    });
    // The next test times a connection: no other page drawing meanwhile.
    for (const context of contexts.splice(0)) await context.close();
  });

  it("plays over WebTransport from a page opened at localhost, as the README says", async () => {
    // Chromium resolves `localhost` to ::1 first and, over QUIC, does not try 127.0.0.1 after
    // it: a WebTransport URL naming `localhost` fails against an IPv4 listener. Matchmaking
    // names an address the listener has instead.
    const page = await newPage("localhost");
    await recorded("localhost", () => [page], async () => {
      const port = new URL(server!.baseUrl).port;
      const answer = page.waitForResponse("**/api/matchmake");
      await page.goto(`http://localhost:${port}/`);
      await page.fill("#name", "localhost-player");
      await page.click("#play");
      const url = ((await (await answer).json()) as { endpoints: { wt: { url: string } | null } }).endpoints.wt?.url;
      await page.waitForFunction(() => window.__tickwire.state === "playing", null, { timeout: 20_000 });
      const view = await debugView(page);
      expect(view.transport, `the page connected over ${view.transport} to ${url} (fallback: ${view.fallback})`).toBe("webtransport");
      expect(url, "an address the WebTransport listener has").toMatch(/^https:\/\/127\.0\.0\.1:\d+\/wt$/);
    });
    await page.context().close();
  });

  /**
   * Plays with matchmaking's WebTransport URL pointed at `port` (rewritten in flight: the
   * server still offers WebTransport), and checks the page ends up on WebSocket in seconds.
   */
  async function fallsBack(label: string, port: number, expected: string): Promise<void> {
    const page = await newPage(label);
    await page.route("**/api/matchmake", async (route) => {
      const response = await route.fetch();
      const answer = (await response.json()) as { endpoints: { wt: { url: string } | null } };
      // (Without it there is nothing to fall back from, and the checks below say so.)
      if (answer.endpoints.wt !== null) {
        answer.endpoints.wt.url = answer.endpoints.wt.url.replace(/:\d+\//, `:${port}/`);
      }
      await route.fulfill({ response, json: answer });
    });
    await recorded(label, () => [page], async () => {
      await enter(page, "/", `${label}-player`);
      const view = await debugView(page);
      // From the client's start (after the page and WebGL are up) to playing: both matchmakes,
      // the failed session and the WebSocket.
      const seconds = view.connectMs! / 1000;
      await page.screenshot({ path: join(artifacts, `${label}.png`) });
      expect(view.transport).toBe("websocket");
      expect(view.fallback, "the page says why it left WebTransport").toMatch(expected);
      await waitFor("the HUD to say WebTransport failed", async () => (await page.textContent("#netstats"))?.includes("WebTransport failed"));
      console.log(`${label}: connected over WebSocket ${seconds.toFixed(2)} s after the client started (${view.fallback})`);
      // The SDK's WebTransport timeout is 3 s; a refused port fails in milliseconds. Seen: 1.9 s
      // and 4.4 s here, 3.9 s and 6.4 s with the machine loaded 8x past its cores (the page's
      // own frames on a software renderer are most of it).
      expect(seconds, "playing over WebSocket within a few seconds").toBeLessThan(10);
    });
    await page.context().close();
  }

  it("falls back to WebSocket within seconds when nothing listens on the WebTransport port", async () => {
    await fallsBack("fallback-closed", await closedUdpPort(), "connection_lost");
  });

  it("falls back to WebSocket within seconds when the WebTransport port swallows every packet", async () => {
    // Bound and never answering: the QUIC handshake hangs until the SDK's 3 s timeout.
    const blackHole = createSocket("udp4");
    await new Promise<void>((resolve) => blackHole.bind(0, "127.0.0.1", resolve));
    try {
      await fallsBack("fallback-silent", blackHole.address().port, "handshake_timed_out");
    } finally {
      blackHole.close();
    }
  });

  it("tells a page on WebTransport that the server is shutting down", async () => {
    // Last: it stops the suite's server. A browser cannot read a QUIC close's code, so the
    // server sends its 4003 as a CLOSE frame and waits for the sessions before it closes.
    const page = await newPage("wt-shutdown");
    await recorded("wt-shutdown", () => [page], async () => {
      await enter(page, "/", "wt-shutdown-player");
      expect((await debugView(page)).transport, "playing over WebTransport").toBe("webtransport");
      server!.process.kill("SIGTERM");
      await page.waitForFunction(() => /shutting down/.test(document.getElementById("banner-text")?.textContent ?? ""), null, {
        timeout: 20_000,
      });
      await page.screenshot({ path: join(artifacts, "webtransport-shutdown.png") });
    });
  });
});
