// What the browser end-to-end tests share: paths, a polling wait under a deadline, a real
// `tickwire serve` on free ports, and Debian's chromium.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createWriteStream, existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { type BrowserContext, type Page, chromium } from "playwright-core";

export const repo = fileURLToPath(new URL("../../../../", import.meta.url));
export const dist = fileURLToPath(new URL("../dist/", import.meta.url));
export const artifacts = join(repo, "target", "e2e");
/** `TICKWIRE_BIN`, else the debug build in cargo's target directory (`CARGO_TARGET_DIR`, relative to the repository, as `make` runs cargo there). */
export const binary = process.env.TICKWIRE_BIN ?? join(resolve(repo, process.env.CARGO_TARGET_DIR ?? "target"), "debug", "tickwire");
export const chromiumPath = process.env.CHROMIUM ?? "/usr/bin/chromium";
export const ADMIN_TOKEN = "e2e-admin-token";

/**
 * Chromium's flags for the tests: headless, no sandbox (CI runs as root), nothing that
 * phones home. QUIC stays on: WebTransport is HTTP/3.
 */
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/**
 * Whether the server binary has a WebTransport endpoint (`serve --wt`): without it (a build
 * from before issue 9's server side) the suites that need it are skipped, saying so, rather
 * than failing.
 */
export const serverHasWebTransport =
  existsSync(binary) && spawnSync(binary, ["serve", "--help"], { encoding: "utf8" }).stdout.includes("--wt");
if (!serverHasWebTransport) {
  console.warn(`SKIPPED: ${binary} has no WebTransport endpoint (no \`serve --wt\`): the server side of issue 9 is missing`);
}

/** Polls `check` every 50 ms until it returns a value that is not `undefined`/`false`, or fails naming `what`. */
export async function waitFor<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  ms = 20_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) {
        return value;
      }
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${what}${last === undefined ? "" : `: ${String(last)}`}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * A running `tickwire serve`: its public HTTP base URL, its operator listener's (the admin
 * page and API, `/metrics`), and every `key=value` of its `listening` line.
 */
export interface Server {
  process: ChildProcess;
  baseUrl: string;
  adminUrl: string;
  listening: Record<string, string>;
}

/**
 * Starts `tickwire serve` on free loopback ports (plus `extraArgs`), its log in
 * target/e2e/`logName`; resolves once it prints its `listening http=…` line.
 */
export async function startServer(dir: string, extraArgs: string[] = [], logName = "server.log"): Promise<Server> {
  const log = createWriteStream(join(artifacts, logName));
  const server = spawn(
    binary,
    ["serve", "--http", "127.0.0.1:0", "--udp", "127.0.0.1:0", "--console", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--shards", "1", ...extraArgs],
    {
      cwd: dir,
      env: { ...process.env, TICKWIRE_WEB__DIR: dist, TICKWIRE_ADMIN__TOKEN: ADMIN_TOKEN, RUST_LOG: "info" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  server.stderr!.pipe(log);
  const lines = createInterface({ input: server.stdout! });
  const listening = await new Promise<Record<string, string>>((resolve, reject) => {
    server.once("exit", (code) => reject(new Error(`tickwire serve exited with ${code}; see target/e2e/${logName}`)));
    server.once("error", reject);
    lines.on("line", (line) => {
      if (/^listening http=/.test(line)) {
        resolve(Object.fromEntries(line.slice("listening ".length).split(" ").map((part) => part.split("=", 2) as [string, string])));
      }
    });
  });
  return { process: server, baseUrl: `http://${listening.http!}`, adminUrl: `http://${listening.admin!}`, listening };
}

/** Stops a child this test started (SIGTERM) and waits for it to exit. */
export async function stop(child: ChildProcess | undefined): Promise<void> {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) {
    return;
  }
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
}

/** A headless chromium with its own profile under `dir`, its one page, and the page's errors as they come. */
export interface Chromium {
  context: BrowserContext;
  page: Page;
  consoleErrors: string[];
}

/** Launches Debian's chromium (never a downloaded browser) for one test file. */
export async function openChromium(dir: string, viewport: { width: number; height: number }): Promise<Chromium> {
  const context = await chromium.launchPersistentContext(join(dir, "chromium-profile"), {
    executablePath: chromiumPath,
    headless: true,
    viewport,
    args: CHROMIUM_ARGS,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const consoleErrors: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") consoleErrors.push(message.text());
  });
  page.on("pageerror", (error) => consoleErrors.push(String(error)));
  return { context, page, consoleErrors };
}
