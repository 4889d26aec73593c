// The admin page (/admin) in Debian's chromium against a real `tickwire serve`: the API
// refuses requests without the token and the page refuses a wrong one; with the right one it
// shows the arena room that SDK bots (WebSocket) and `tickwire bots` (UDP, whose links
// measure RTT and loss) fill, lists the room's members, a kick from the page removes that
// bot from the server, a broadcast reaches the others, and drain stops new players. The page
// is the server's own (embedded from crates/server/assets/admin), checked fresh first.
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { fetchArenaMap } from "@tickwire/arena";
import type { BrowserContext, Page } from "playwright-core";
import { build } from "vite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { type Bot, startBot } from "./bots.js";
import { ADMIN_TOKEN, type Server, artifacts, binary, chromiumPath, openChromium, repo, startServer, stop, waitFor } from "./harness.js";

const web = join(repo, "clients", "ts", "web");

const UDP_BOTS = 2;

interface MemberRow {
  id: string;
  name: string;
  transport: string;
  rtt: string;
}

describe("the admin page in chromium", () => {
  let scratch: string;
  let server: Server | undefined;
  let udpBots: ChildProcess | undefined;
  const bots: Bot[] = [];
  let context: BrowserContext | undefined;
  let page: Page;
  let consoleErrors: string[] = [];

  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true });
    expect(existsSync(chromiumPath), `${chromiumPath} exists (apt-get install chromium)`).toBe(true);
    scratch = mkdtempSync(join(tmpdir(), "tickwire-admin-e2e-"));
    // WebTransport on a free port, not the default 4433 another server may hold.
    server = await startServer(scratch, ["--wt", "127.0.0.1:0"], "admin-server.log");
    const map = await fetchArenaMap({ baseUrl: server.baseUrl });
    for (let i = 1; i <= 2; i++) {
      bots.push(startBot({ baseUrl: server.baseUrl, map, name: `admin-bot-${i}`, seed: i }));
    }
    await waitFor("the SDK bots to play", () => bots.every((bot) => bot.arena.status.state === "playing"));
    const log = createWriteStream(join(artifacts, "admin-bots-udp.log"));
    udpBots = spawn(
      binary,
      ["bots", "--server", server.baseUrl, "--scenario", "arena", "--transport", "udp", "--players", String(UDP_BOTS), "--rooms", "1"]
        .concat(["--warmup", "0s", "--duration", "600s"]),
      { cwd: scratch, stdio: ["ignore", "pipe", "pipe"] },
    );
    udpBots.stdout!.pipe(log);
    udpBots.stderr!.pipe(log);
    ({ context, page, consoleErrors } = await openChromium(scratch, { width: 1280, height: 900 }));
  });

  afterAll(async () => {
    await context?.close();
    for (const bot of bots) bot.stop();
    await stop(udpBots);
    await stop(server?.process);
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  it("is built into the server exactly as its sources build now", async () => {
    // The server embeds crates/server/assets/admin; a page edited without `npm run
    // build:admin` would ship its old build.
    const fresh = mkdtempSync(join(tmpdir(), "tickwire-admin-build-"));
    try {
      await build({ configFile: join(web, "vite.admin.config.ts"), build: { outDir: fresh } });
      const embedded = join(repo, "crates", "server", "assets", "admin");
      expect(readdirSync(fresh).sort()).toEqual(readdirSync(embedded).sort());
      for (const file of readdirSync(fresh)) {
        expect(readFileSync(join(fresh, file), "utf8"), `${file} is stale: npm run build:admin in clients/ts/web`).toBe(
          readFileSync(join(embedded, file), "utf8"),
        );
      }
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  });

  async function members(): Promise<MemberRow[]> {
    return page.$$eval("#members tbody tr", (rows) =>
      rows.map((row) => {
        const cells = Array.from(row.querySelectorAll("td"), (td) => td.textContent ?? "");
        return { id: cells[0]!, name: cells[1]!, transport: cells[2]!, rtt: cells[3]! };
      }),
    );
  }

  it("refuses without the token", async () => {
    const bare = await fetch(`${server!.adminUrl}/api/admin/players`);
    expect(bare.status).toBe(401);
    const wrong = await fetch(`${server!.adminUrl}/api/admin/players`, { headers: { authorization: "Bearer not-the-token" } });
    expect(wrong.status).toBe(401);

    await page.goto(`${server!.adminUrl}/admin`);
    await page.waitForSelector("#login", { state: "visible" });
    expect(await page.isHidden("#console"), "nothing of the server is shown before logging in").toBe(true);
    await page.fill("#token", "not-the-token");
    await page.click("#login button[type=submit]");
    await page.waitForFunction(() => document.getElementById("login-error")!.textContent!.startsWith("refused"));
    expect(await page.isHidden("#console")).toBe(true);
    // The browser logs the refused request (401) as an error; that one was the point.
    consoleErrors.length = 0;
  });

  it("logs in, sees the bots, kicks one and sees it gone, broadcasts, drains", async () => {
    try {
      await page.fill("#token", ADMIN_TOKEN);
      await page.click("#login button[type=submit]");
      await page.waitForSelector("#console", { state: "visible" });

      // The arena room, filled by the two SDK bots and the UDP bots.
      const players = 2 + UDP_BOTS;
      const roomId = await waitFor("the arena room with every bot in the rooms table", () =>
        page.$$eval(
          "#rooms tbody tr",
          (rows, players) => {
            const row = rows.find((row) => {
              const cells = Array.from(row.querySelectorAll("td"), (td) => td.textContent ?? "");
              return cells[1] === "arena" && Number(cells[3]!.split(" / ")[0]) >= players;
            });
            return row === undefined ? undefined : (row as HTMLElement).dataset.room;
          },
          players,
        ),
      );
      // Its traffic, from the room's own counters two readings apart: the arena sends
      // snapshots every tick, so bytes flow out.
      const rates = await waitFor("the arena room's bytes/s", async () => {
        const text = await page.$eval(`#rooms tr[data-room="${roomId}"] td.bytes`, (td) => td.textContent ?? "");
        return text !== "–" && !text.endsWith("/ 0") && text;
      });
      expect(rates).toMatch(/^[\d.]+( [kMG])? \/ [\d.]+( [kMG])?$/);
      const ticks = await page.$eval(`#rooms tr[data-room="${roomId}"] td.ticks`, (td) => td.textContent ?? "");
      const [p50, p99] = ticks.split(" / ").map(Number);
      expect(p50! >= 0 && p99! > 0 && p50! <= p99!, `the room's own tick p50 / p99 ms: ${ticks}`).toBe(true);
      await page.click(`#rooms tr[data-room="${roomId}"] button[data-action=members]`);
      const listed = await waitFor("every bot among the room's members, with the UDP links' RTT", async () => {
        const rows = await members();
        const udp = rows.filter((row) => row.transport === "udp");
        const named = bots.every((bot) => rows.some((row) => row.name === bot.name && row.transport === "ws"));
        return named && udp.length >= UDP_BOTS && udp.every((row) => Number(row.rtt) > 0) && rows;
      });
      expect(listed.filter((row) => row.transport === "ws").every((row) => row.rtt === "–"), "no RTT is made up for WebSocket").toBe(true);
      await page.screenshot({ path: join(artifacts, "admin.png") });

      // Kick the first SDK bot from the page.
      const victim = bots[0]!;
      const row = listed.find((row) => row.name === victim.name)!;
      await page.click(`#members tr[data-player="${row.id}"] button[data-action=kick]`);
      await waitFor(`${victim.name} gone from the members`, async () => !(await members()).some((member) => member.id === row.id));
      await waitFor(`${victim.name} told it was kicked`, () => victim.arena.status.state === "ended");
      const answer = await fetch(`${server!.adminUrl}/api/admin/players`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      const left = (await answer.json()) as { id: number; name: string }[];
      expect(left.some((player) => player.name === victim.name), "the server no longer has the kicked bot").toBe(false);
      expect(left.some((player) => player.name === bots[1]!.name), "the other bot stays").toBe(true);

      // A broadcast from the page reaches the players still there.
      const heard: string[] = [];
      bots[1]!.arena.on("announcement", (text) => heard.push(text));
      await page.fill("#say-text", "maintenance in 5 minutes");
      await page.click("#say button[type=submit]");
      await waitFor("the broadcast heard by the other bot", () => heard.includes("maintenance in 5 minutes"));

      // Drain, confirmed in the page's dialog: the server stops taking players.
      page.once("dialog", (dialog) => void dialog.accept());
      await page.click("#drain");
      await page.waitForFunction(() => document.getElementById("phase")!.textContent === "draining");
      const matchmake = await fetch(`${server!.baseUrl}/api/matchmake`, { method: "POST", body: JSON.stringify({ kind: "arena", name: "late" }) });
      expect(matchmake.status, "a draining server takes no new player").toBe(503);
      expect(consoleErrors).toEqual([]);
    } catch (error) {
      await page.screenshot({ path: join(artifacts, "admin-failure.png") }).catch(() => {});
      throw error;
    }
  });
});
