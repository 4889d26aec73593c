#!/usr/bin/env node
// Builds the @tickwire/client and @tickwire/arena tarballs into a directory of your choice
// without writing into the checkout: the packages' sources are copied to a temporary
// directory, TypeScript (the version package-lock.json pins) is installed there, and
// `npm pack` runs there (its prepack builds dist/). Nothing in clients/ts changes: no
// node_modules/, no dist/.
//
//   node clients/ts/scripts/pack.mjs <out-dir>     # prints the tarballs' paths
//
// Needs Node 20 and npm, and the registry (or npm's cache) for TypeScript.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const sdk = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** What each package's build reads, relative to clients/ts. The arena builds against the client's dist/. */
const PACKAGES = [
  { dir: ".", files: ["package.json", "tsconfig.json", "tsconfig.build.json", "README.md", "src"] },
  { dir: "arena", files: ["package.json", "tsconfig.build.json", "README.md", "src"] },
];

function typescriptVersion() {
  const lock = JSON.parse(readFileSync(join(sdk, "package-lock.json"), "utf8"));
  const version = lock.packages?.["node_modules/typescript"]?.version;
  if (typeof version !== "string") throw new Error("package-lock.json pins no typescript");
  return version;
}

function npm(args, cwd) {
  return execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
}

export function pack(outDir) {
  const out = resolve(outDir);
  mkdirSync(out, { recursive: true });
  const staging = mkdtempSync(join(tmpdir(), "tickwire-pack-"));
  try {
    for (const { dir, files } of PACKAGES) {
      for (const file of files) {
        const from = join(sdk, dir, file);
        if (!existsSync(from)) throw new Error(`${join(dir, file)} is missing`);
        cpSync(from, join(staging, dir, file), { recursive: true });
      }
    }
    // The build's one tool, at the locked version; scripts in arena/ find it in the parent's
    // node_modules/.bin as npm puts every ancestor's there.
    npm(["install", "--no-save", "--no-package-lock", "--no-audit", "--no-fund", "--loglevel=error", `typescript@${typescriptVersion()}`], staging);
    const tarballs = [];
    for (const { dir } of PACKAGES) {
      const name = npm(["pack", "--silent", "--pack-destination", out], join(staging, dir)).trim().split("\n").pop();
      tarballs.push(join(out, name));
    }
    return tarballs;
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const outDir = process.argv[2];
  if (outDir === undefined) {
    console.error("usage: node clients/ts/scripts/pack.mjs <out-dir>");
    process.exit(2);
  }
  for (const tarball of pack(outDir)) console.log(tarball);
}
