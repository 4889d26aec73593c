// Four in a row played in Debian's chromium (never a downloaded browser), driven by
// playwright-core: the example's own server on a free port, two browser contexts play a game
// to a win, an illegal move is refused with its reason shown, and one tab reloads mid-game
// and keeps its seat. `make test-example` runs it after building the server.
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

const repo = fileURLToPath(new URL("../../../", import.meta.url));
const binary =
  process.env.FOUR_IN_A_ROW_BIN ??
  join(resolve(repo, process.env.CARGO_TARGET_DIR ?? "target"), "debug", "four-in-a-row");
const artifacts = join(repo, "target", "e2e");
const TIMEOUT = 15_000;

let server;
let browser;
let baseUrl;
let adminUrl;

before(async () => {
  mkdirSync(artifacts, { recursive: true });
  server = spawn(binary, ["127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
  // The builder logs `listening http=…` on stderr once it serves.
  baseUrl = await new Promise((found, failed) => {
    const lines = createInterface({ input: server.stderr });
    const timer = setTimeout(() => failed(new Error("the server never said where it listens")), 30_000);
    lines.on("line", (line) => {
      const http = /listening http=(\S+)/.exec(line);
      if (http) {
        clearTimeout(timer);
        adminUrl = `http://${/ admin=(\S+)/.exec(line)?.[1]}`;
        found(`http://${http[1]}`);
      }
    });
    server.on("exit", (code) => failed(new Error(`${binary} exited with ${code}`)));
  });
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
  });
});

after(async () => {
  await browser?.close();
  server?.kill("SIGTERM");
});

/** Waits until the page's status line is in `state` (`your-move`, `their-move`, `won`, …). */
async function state(page, expected) {
  await page.waitForSelector(`#status[data-state="${expected}"]`, { timeout: TIMEOUT });
}

/** Drops a disc into `column` (0 to 6) by clicking its top cell. */
async function drop(page, column) {
  await page.click(`[data-column="${column}"][data-row="5"]`);
}

async function discs(page) {
  return page.$$eval("[data-disc]", (cells) =>
    cells.filter((cell) => cell.dataset.disc !== "0").map((cell) => `${cell.dataset.column},${cell.dataset.row}=${cell.dataset.disc}`).sort(),
  );
}

test("two players play to a win, a wrong move is refused and a reloaded tab keeps its seat", async () => {
  const ada = await (await browser.newContext()).newPage();
  const bob = await (await browser.newContext()).newPage();
  try {
    await ada.goto(`${baseUrl}/?name=ada`);
    await state(ada, "waiting");
    await bob.goto(`${baseUrl}/?name=bob`);
    await state(ada, "your-move");
    await state(bob, "their-move");

    // bob moves out of turn: the room refuses, in its words, on bob's page.
    await drop(bob, 3);
    await bob.waitForSelector("#notice:has-text('not your turn')", { timeout: TIMEOUT });
    assert.deepEqual(await discs(bob), [], "nothing was dropped");

    // ada stacks column 0, bob column 1.
    for (const round of [0, 1]) {
      await drop(ada, 0);
      await state(bob, "your-move");
      await drop(bob, 1);
      await state(ada, "your-move");
      assert.equal((await discs(ada)).length, 2 * (round + 1));
    }

    // ada's tab reloads mid-game: same seat, same board, still her move.
    const before = await discs(ada);
    await ada.reload();
    await state(ada, "your-move");
    assert.deepEqual(await discs(ada), before, "the board came back");
    assert.equal(await ada.evaluate(() => document.body.dataset.you), "0", "the same seat");

    await drop(ada, 0);
    await state(bob, "your-move");
    await drop(bob, 1);
    await state(ada, "your-move");
    await drop(ada, 0);
    await state(ada, "won");
    await state(bob, "lost");
    assert.equal(await ada.textContent("#status"), "You won!");
    assert.equal(await bob.textContent("#status"), "You lost");
    await ada.screenshot({ path: join(artifacts, "four-in-a-row-won.png") });
  } finally {
    await ada.context().close();
    await bob.context().close();
  }
});

test("the server built with Server::builder() serves the admin page on its operator listener", async () => {
  const page = await (await browser.newContext()).newPage();
  try {
    await page.goto(`${adminUrl}/admin`);
    assert.equal(await page.title(), "tickwire admin");
    // Its script runs and calls the API beside it: a wrong token is refused on the page.
    await page.fill("#token", "not-the-token");
    await page.click("#login button[type=submit]");
    await page.waitForFunction(() => (document.getElementById("login-error")?.textContent ?? "") !== "", null, { timeout: TIMEOUT });
    assert.equal((await fetch(`${adminUrl}/api/admin/stats`)).status, 401);
  } finally {
    await page.context().close();
  }
});
