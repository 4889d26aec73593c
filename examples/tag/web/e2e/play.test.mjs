// Tag played in Debian's chromium (never a downloaded browser), driven by playwright-core:
// the example's own server on a free port and two browser contexts (two players). Both see
// both runners and the roster; one runs and the other sees it move, interpolated; the
// chaser tags the other; a tab reloads and keeps its seat. `make test-example` runs it
// after building the server and the page.
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

const repo = fileURLToPath(new URL("../../../../", import.meta.url));
const binary = process.env.TAG_BIN ?? join(resolve(repo, process.env.CARGO_TARGET_DIR ?? "target"), "debug", "tag");
const artifacts = join(repo, "target", "e2e");
const TIMEOUT = 15_000;

let server;
let browser;
let baseUrl;
let adminUrl;
let adminToken;

before(async () => {
  mkdirSync(artifacts, { recursive: true });
  server = spawn(binary, ["127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
  // The builder logs `listening http=…` on stderr once it serves.
  baseUrl = await new Promise((found, failed) => {
    const lines = createInterface({ input: server.stderr });
    const timer = setTimeout(() => failed(new Error("the server never said where it listens")), 30_000);
    lines.on("line", (line) => {
      // The generated admin token's file (the token itself is never logged).
      const tokenFile = /admin API token is in (\S+)/.exec(line);
      if (tokenFile) adminToken = readFileSync(tokenFile[1], "utf8").trim();
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

/** What a page's mirror holds: its seat, the runners by seat, the roster's names. */
function seen(page) {
  return page.evaluate(() => {
    const { mirror } = window.tag;
    const runners = {};
    for (const { fields } of mirror.entities()) runners[fields.seat] = { ...fields, position: [...fields.position] };
    return { me: mirror.mySeat, runners, roster: [...mirror.roster()].map(({ member }) => member.name) };
  });
}

/** Waits until `check(seen(page))` holds. */
async function until(page, check, what) {
  const deadline = Date.now() + TIMEOUT;
  for (;;) {
    const now = await seen(page);
    if (check(now)) return now;
    if (Date.now() > deadline) assert.fail(`${what}: ${JSON.stringify(now)}`);
    await page.waitForTimeout(50);
  }
}

test("two players see each other run, tag, and a reload keeps the seat", async () => {
  const ada = await (await browser.newContext()).newPage();
  const bob = await (await browser.newContext()).newPage();
  const errors = [];
  for (const page of [ada, bob]) page.on("pageerror", (error) => errors.push(error.message));
  await ada.goto(`${baseUrl}/?name=ada`);
  await until(ada, (s) => s.me === 0, "ada is seated first");
  await bob.goto(`${baseUrl}/?name=bob`);
  for (const page of [ada, bob]) {
    await until(page, (s) => Object.keys(s.runners).length === 2 && s.roster.length === 2, "both runners and both names");
  }
  assert.deepEqual((await seen(bob)).roster, ["ada", "bob"]);
  await ada.waitForSelector('#status[data-state="it"]', { timeout: TIMEOUT });
  await bob.waitForSelector('#status[data-state="running"]', { timeout: TIMEOUT });
  await bob.waitForSelector('#roster li[data-it="true"]', { timeout: TIMEOUT });

  // Bob runs down; Ada's page sees his runner go.
  const start = (await seen(ada)).runners[1].position;
  await bob.keyboard.down("ArrowDown");
  await until(ada, (s) => s.runners[1].position[1] > start[1] + 3, "bob's runner moves on ada's page");
  await bob.keyboard.up("ArrowDown");

  // Ada chases: right along her row to Bob's column, then down to him.
  await ada.keyboard.down("ArrowRight");
  await until(ada, (s) => s.runners[0].position[0] >= s.runners[1].position[0] - 0.3, "ada reaches bob's column");
  await ada.keyboard.up("ArrowRight");
  await ada.keyboard.down("ArrowDown");
  await until(bob, (s) => s.runners[1].it, "bob is tagged");
  await ada.keyboard.up("ArrowDown");
  await bob.waitForSelector('#status[data-state="it"]', { timeout: TIMEOUT });
  assert.equal((await seen(ada)).runners[1].tagged, 1);
  await ada.screenshot({ path: join(artifacts, "tag.png") });

  // A reload comes back to the same seat, in the same room.
  await bob.reload();
  await until(bob, (s) => s.me === 1 && s.roster.length === 2, "bob is back in his seat");
  await until(ada, (s) => Object.keys(s.runners).length === 2, "ada still sees two runners");
  assert.deepEqual(errors, []);

  // The operator's page shows what the runners cost, field by field.
  const admin = await (await browser.newContext()).newPage();
  await admin.goto(`${adminUrl}/admin/`);
  await admin.fill("#token", adminToken);
  await admin.click('#login button[type="submit"]');
  await admin.waitForSelector("#replication-section:not([hidden])", { timeout: TIMEOUT });
  const rows = await admin.$$eval("#replication tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent)));
  const position = rows.find(([kind, entity, field]) => kind === "tag" && entity === "Runner" && field === "position");
  assert.ok(position, JSON.stringify(rows));
  await admin.screenshot({ path: join(artifacts, "tag-admin.png") });
});
