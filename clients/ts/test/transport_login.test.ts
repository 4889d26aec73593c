// The stream login's proof of possession (docs/PROTOCOL.md, "Login: proof of possession")
// against the vectors the Rust tests check too.
import { describe, expect, it } from "vitest";

import { LOGIN_BYTES, PROOF_LABEL, clientToServerKey, loginMessage, loginProof } from "../src/transport/login.js";
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
  });
});
