#!/usr/bin/env node
// This folder as a Unity package (Unity Package Manager, from a folder or a git URL with
// `?path=/clients/csharp`): checks `package.json` against the rules Unity applies to a
// package manifest, and that every asset Unity imports has its `.meta` file. A package from
// git is immutable, so Unity cannot write the `.meta` files itself and ignores an asset
// without one: they are committed, with GUIDs derived from the asset's path (stable, and the
// same for everyone). Folders ending in `~` and dot-files are not imported and have none.
//
//   node unity-package.mjs --check   # build.sh runs this; fails on any problem
//   node unity-package.mjs --write   # (re)writes the .meta files after adding or moving assets
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(fileURLToPath(import.meta.url));

/** A problem with the manifest, or none. */
function manifestProblems() {
  const problems = [];
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  } catch (error) {
    return [`package.json: ${error.message}`];
  }
  const need = (field, pattern, what) => {
    const value = manifest[field];
    if (typeof value !== "string" || !pattern.test(value)) problems.push(`package.json: "${field}" must be ${what}, not ${JSON.stringify(value)}`);
  };
  // Unity's rules: a lowercase reverse-domain name of at most 214 characters, a SemVer
  // version, a `major.minor` Unity version, an optional release like "0b4".
  need("name", /^(?=.{1,214}$)[a-z0-9-_]+(\.[a-z0-9-_]+){2,}$/, "a lowercase reverse-domain name (com.company.package)");
  need("version", /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/, "a SemVer version");
  need("displayName", /^.{1,50}$/, "a name of 1 to 50 characters");
  need("description", /^.+$/s, "a description");
  need("unity", /^\d{4}\.[1-4]$/, "the oldest Unity version, as 2019.4");
  if (manifest.unityRelease !== undefined) need("unityRelease", /^\d+[abfp]\d+$/, "a release such as 0f1");
  for (const [i, sample] of (manifest.samples ?? []).entries()) {
    if (typeof sample.displayName !== "string" || typeof sample.path !== "string") {
      problems.push(`package.json: samples[${i}] needs displayName and path`);
    } else if (!sample.path.startsWith("Samples~/") || !existsSync(join(root, sample.path))) {
      problems.push(`package.json: samples[${i}].path ${sample.path} must be a folder under Samples~/`);
    }
  }
  return problems;
}

/** Whether Unity imports `name` (a file or folder) as an asset. */
function imported(name) {
  return !name.startsWith(".") && !name.endsWith("~") && !name.endsWith(".meta");
}

/** Every asset, relative to the package root, folders included. */
function assets(dir = root) {
  const found = [];
  for (const name of readdirSync(dir).sort()) {
    if (!imported(name)) continue;
    const path = join(dir, name);
    found.push(relative(root, path));
    if (statSync(path).isDirectory()) found.push(...assets(path));
  }
  return found;
}

/** The .meta file Unity would write for `asset`, with a GUID derived from its path. */
function meta(asset) {
  const guid = createHash("md5").update(`dev.tickwire.client/${asset}`).digest("hex");
  const head = `fileFormatVersion: 2\nguid: ${guid}\n`;
  const tail = "  userData: \n  assetBundleName: \n  assetBundleVariant: \n";
  if (statSync(join(root, asset)).isDirectory()) return `${head}folderAsset: yes\nDefaultImporter:\n  externalObjects: {}\n${tail}`;
  if (asset.endsWith(".cs")) {
    return `${head}MonoImporter:\n  externalObjects: {}\n  serializedVersion: 2\n  defaultReferences: []\n  executionOrder: 0\n  icon: {instanceID: 0}\n${tail}`;
  }
  if (asset.endsWith(".asmdef")) return `${head}AssemblyDefinitionImporter:\n  externalObjects: {}\n${tail}`;
  if (/\.(json|md|txt)$/.test(asset)) return `${head}TextScriptImporter:\n  externalObjects: {}\n${tail}`;
  return `${head}DefaultImporter:\n  externalObjects: {}\n${tail}`;
}

/** .meta files with no asset beside them. */
function strayMetas(dir = root) {
  const stray = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (name.endsWith(".meta") && !existsSync(path.slice(0, -".meta".length))) stray.push(relative(root, path));
    else if (imported(name) && statSync(path).isDirectory()) stray.push(...strayMetas(path));
  }
  return stray;
}

const mode = process.argv[2];
if (mode === "--write") {
  for (const asset of assets()) writeFileSync(join(root, `${asset}.meta`), meta(asset));
  for (const stray of strayMetas()) unlinkSync(join(root, stray));
} else if (mode === "--check") {
  const problems = manifestProblems();
  for (const asset of assets()) {
    const path = join(root, `${asset}.meta`);
    if (!existsSync(path)) problems.push(`${asset}: no .meta (node unity-package.mjs --write)`);
    else if (readFileSync(path, "utf8") !== meta(asset)) problems.push(`${asset}.meta: not what --write makes`);
  }
  for (const stray of strayMetas()) problems.push(`${stray}: a .meta without its asset`);
  if (problems.length > 0) {
    console.error(`clients/csharp is not a valid Unity package:\n  ${problems.join("\n  ")}`);
    process.exit(1);
  }
} else {
  console.error("usage: node unity-package.mjs --check | --write");
  process.exit(2);
}
