// The stream login's proof of possession (docs/PROTOCOL.md, "Login: proof of possession")
// against the vectors the Rust tests check too.
import { createHash } from "node:crypto";

import { afterEach, describe, expect, it, vi } from "vitest";

import { hmacSha256, sha256 } from "../src/transport/hmac-sha256.js";
import { LOGIN_BYTES, PROOF_LABEL, clientToServerKey, connectTokenProblem, loginMessage, loginProof } from "../src/transport/login.js";
import { fromHex, readRepoJson, toHex } from "./vectors.js";

interface Vector {
  name: string;
  client_to_server_key: string;
  server_nonce: string;
  token: string;
  proof: string;
}

const { vectors } = readRepoJson<{ vectors: Vector[] }>("crates/proto/tests/vectors/stream_login.json");

describe("stream login", () => {
  it("has the documented label", () => {
    expect(new TextDecoder().decode(PROOF_LABEL)).toBe("tickwire stream login v1");
    expect(PROOF_LABEL.length).toBe(24);
  });

  it.each(vectors.map((v) => [v.name, v] as const))("proves possession as the vector says: %s", async (_, vector) => {
    const key = fromHex(vector.client_to_server_key);
    const nonce = fromHex(vector.server_nonce);
    const token = fromHex(vector.token);
    expect(toHex(await loginProof(key, nonce, token))).toBe(vector.proof);
  });

  it("reads the key from a public token and makes the login: token, then proof", async () => {
    const vector = vectors[0]!;
    const token = fromHex(vector.token);
    expect(toHex(clientToServerKey(token)!)).toBe(vector.client_to_server_key);
    const login = await loginMessage(token, fromHex(vector.server_nonce));
    expect(login.length).toBe(LOGIN_BYTES);
    expect(toHex(login)).toBe(vector.token + vector.proof);
  });

  it("refuses a challenge of another length and a token whose addresses do not read", async () => {
    const token = fromHex(vectors[0]!.token);
    await expect(loginMessage(token, new Uint8Array(31))).rejects.toThrow(/31 bytes/);
    expect(clientToServerKey(new Uint8Array(2048))).toBeNull();
    expect(clientToServerKey(token.subarray(1))).toBeNull();
    expect(connectTokenProblem(token)).toBeNull();
    expect(connectTokenProblem(token.subarray(1))).toMatch(/2047 bytes, not 2048/);
    expect(connectTokenProblem(new Uint8Array(2048))).toMatch(/address list/);
  });
});

describe("the proof without WebCrypto (an http page on another machine: not a secure context)", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("hashes as FIPS 180-4 says, across block boundaries", () => {
    const hash = (text: string): string => toHex(sha256(new TextEncoder().encode(text)));
    expect(hash("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect(hash("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")).toBe(
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
    );
    for (let length = 0; length <= 130; length++) {
      const message = Uint8Array.from({ length }, (_, i) => (i * 31 + 7) & 0xff);
      expect(toHex(sha256(message)), `${length} bytes`).toBe(createHash("sha256").update(message).digest("hex"));
    }
  });

  it("makes RFC 4231's HMACs, a key longer than a block included", () => {
    expect(toHex(hmacSha256(new Uint8Array(20).fill(0x0b), new TextEncoder().encode("Hi There")))).toBe(
      "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
    );
    expect(toHex(hmacSha256(new Uint8Array(131).fill(0xaa), new TextEncoder().encode("Test Using Larger Than Block-Size Key - Hash Key First")))).toBe(
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
    );
  });

  it.each(vectors.map((v) => [v.name, v] as const))("proves possession as the vector says: %s", async (_, vector) => {
    vi.stubGlobal("crypto", undefined);
    expect((globalThis as { crypto?: unknown }).crypto, "no WebCrypto here").toBeUndefined();
    const proof = await loginProof(fromHex(vector.client_to_server_key), fromHex(vector.server_nonce), fromHex(vector.token));
    expect(toHex(proof)).toBe(vector.proof);
  });
});
