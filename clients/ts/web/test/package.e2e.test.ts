// The SDK as a user gets it: `scripts/pack.mjs` makes the @tickwire/client and
// @tickwire/arena tarballs (building in a temporary directory: nothing in the checkout is
// written), a project in a temporary directory outside the repository installs them (from
// the tarballs alone: they have no dependencies but each other), a strict TypeScript program
// there compiles against the installed type declarations and ESM exports, and Node runs it
// against a real `tickwire serve`: it joins the arena over WebSocket and the server's admin
// API sees it seated.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { ADMIN_TOKEN, type Server, artifacts, repo, startServer, stop, waitFor } from "./harness.js";

const sdk = join(repo, "clients", "ts");
const tsc = join(repo, "clients", "ts", "web", "node_modules", ".bin", "tsc");

/** The consumer: what a game's own code outside the repository would write. */
const CONSUMER = `
import { TickwireClient, type ConnectionParams, BitWriter, BitReader } from "@tickwire/client";
import { ArenaClient, fetchArenaMap } from "@tickwire/arena";

declare const process: { argv: string[]; exit(code: number): never };

const baseUrl = process.argv[2]!;
const url = new URL(baseUrl);
const page = { protocol: url.protocol, host: url.host };

// The wire format round trip, from the package.
const writer = new BitWriter();
writer.writeBits(5, 3);
const bytes = writer.finish();
const echoed = new BitReader(bytes).readBits(3);

const map = await fetchArenaMap({ baseUrl });
const arena = new ArenaClient({ map, name: "packaged", baseUrl, page });
const client: TickwireClient = arena.client;
let params: ConnectionParams | null = null;
client.on("connected", (connected) => {
  params = connected;
});
const seated = await new Promise<number>((resolve, reject) => {
  const timer = setInterval(() => {
    const me = arena.view(performance.now()).me;
    if (me !== null) {
      clearInterval(timer);
      resolve(me.id);
    }
  }, 20);
  arena.on("status", (status) => {
    if (status.state === "ended") reject(new Error(status.message));
  });
  arena.start();
});
const tickRate = (params as ConnectionParams | null)?.tickRateHz ?? null;
console.log(JSON.stringify({ seated, echoed, transport: client.transport, tickRate }));
// Stay connected until the test has looked at the server's side, then leave.
setTimeout(() => { arena.close(); process.exit(0); }, 60_000);
`;

describe("the SDK packed and installed outside the repository", () => {
  let server: Server | undefined;
  let project: string;
  let serverDir: string;

  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true });
    project = mkdtempSync(join(tmpdir(), "tickwire-sdk-user-"));
    // WebTransport on a free port, not the default 4433 another server may hold.
    serverDir = mkdtempSync(join(tmpdir(), "tickwire-sdk-server-"));
    server = await startServer(serverDir, ["--wt", "127.0.0.1:0"], "package-server.log");
  });

  afterAll(async () => {
    await stop(server?.process);
    rmSync(project, { recursive: true, force: true });
    rmSync(serverDir, { recursive: true, force: true });
  });

  it("packs, installs, compiles against its types and joins a real server", async () => {
    const packs = join(project, "packs");
    mkdirSync(packs);
    // Packed without writing into the checkout: no dist/ (nor node_modules/) appears there.
    const builds = [join(sdk, "dist"), join(sdk, "arena", "dist")];
    const before = builds.map((dir) => (existsSync(dir) ? statSync(dir).mtimeMs : null));
    execFileSync(process.execPath, [join(sdk, "scripts", "pack.mjs"), packs], { stdio: ["ignore", "pipe", "inherit"] });
    const tarballs = readdirSync(packs).sort();
    expect(tarballs).toEqual(["tickwire-arena-0.1.0.tgz", "tickwire-client-0.1.0.tgz"]);
    expect(builds.map((dir) => (existsSync(dir) ? statSync(dir).mtimeMs : null)), "the checkout's dist/ untouched").toEqual(before);

    const app = join(project, "app");
    mkdirSync(app);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "sdk-user", private: true, type: "module" }));
    execFileSync(
      "npm",
      ["install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", ...tarballs.map((t) => join(packs, t))],
      { cwd: app, stdio: ["ignore", "pipe", "inherit"] },
    );
    const installed = JSON.parse(readFileSync(join(app, "node_modules", "@tickwire", "client", "package.json"), "utf8"));
    expect(installed.exports["."].types).toBe("./dist/index.d.ts");

    writeFileSync(join(app, "main.ts"), CONSUMER);
    writeFileSync(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          lib: ["ES2022", "DOM"],
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          exactOptionalPropertyTypes: true,
          types: [],
          outDir: "out",
        },
        files: ["main.ts"],
      }),
    );
    execFileSync(tsc, ["-p", "tsconfig.json"], { cwd: app, stdio: ["ignore", "inherit", "inherit"] });

    // Node 20 has WebSocket behind a flag (on by default from 22); the SDK takes the global.
    const user = spawn(process.execPath, ["--experimental-websocket", "--no-warnings", join(app, "out", "main.js"), server!.baseUrl], {
      cwd: app,
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        user.once("exit", (code) => reject(new Error(`the packaged client exited with ${code}`)));
        createInterface({ input: user.stdout! }).once("line", resolve);
      });
      const report = JSON.parse(line) as { seated: number; echoed: number; transport: string; tickRate: number | null };
      expect(report.echoed).toBe(5);
      expect(report.transport).toBe("websocket");
      expect(report.tickRate).toBeGreaterThan(0);
      const players = await waitFor("the packaged client in the admin API's players", async () => {
        const answer = await fetch(`${server!.adminUrl}/api/admin/players`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
        const list = (await answer.json()) as { id: number; name: string; transport: string }[];
        return list.some((player) => player.name === "packaged") && list;
      });
      expect(players.find((player) => player.name === "packaged")).toMatchObject({ transport: "ws" });
    } finally {
      await stop(user);
    }
  });
});
