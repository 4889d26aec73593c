// Reads the Rust crates' vector files in place, so the TypeScript tests and the Rust tests
// can never hold different copies.
import { readFileSync } from "node:fs";

const repoRoot = new URL("../../../", import.meta.url);

/** Parses a JSON file given by its path from the repository root. */
export function readRepoJson<T>(path: string): T {
  return JSON.parse(readFileSync(new URL(path, repoRoot), "utf8")) as T;
}

/** Bytes from lowercase hex. */
export function fromHex(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) {
    out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  }
  return out;
}

/** Lowercase hex of bytes. */
export function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
