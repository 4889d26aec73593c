/**
 * The login of a stream transport (`docs/PROTOCOL.md`, "WebSocket transport", "Connecting"):
 * the server's first message is a random 32-byte challenge; the client answers with its
 * connect token followed by a proof that it holds the token's client-to-server key,
 * HMAC-SHA256 under that key over `"tickwire stream login v1"` ‖ challenge ‖ token. The
 * sealed part of the token also travels in clear in UDP's request, so the token alone is not
 * enough. WebCrypto's HMAC where there is one; browsers have it in secure contexts only (https
 * pages, and http ones on localhost), so elsewhere the proof is computed by `hmac-sha256.ts`.
 */

import { hmacSha256 } from "./hmac-sha256.js";

/** The bytes of a public connect token. */
export const CONNECT_TOKEN_BYTES = 2048;
/** Bytes of the server's challenge. */
export const SERVER_NONCE_BYTES = 32;
/** Bytes of the proof (an HMAC-SHA256 tag). */
export const PROOF_BYTES = 32;
/** Bytes of a login: the token, then the proof. */
export const LOGIN_BYTES = CONNECT_TOKEN_BYTES + PROOF_BYTES;
/**
 * Where a handshaking connection is in the login: waiting for the server's challenge,
 * making the proof (the server sends nothing meanwhile: anything is a protocol violation),
 * or waiting for the server to accept.
 */
export type LoginStep = "challenge" | "proving" | "accepted";

/** The 24 ASCII bytes the proof's HMAC input starts with. */
export const PROOF_LABEL = new TextEncoder().encode("tickwire stream login v1");

/** Where a public token's address count sits; the addresses, then the two keys, follow. */
const ADDRESS_COUNT_OFFSET = 1077;
const KEY_BYTES = 32;

/**
 * The client-to-server key of a public connect token, or `null` if its address list does
 * not read (a count of 1 to 32, each address type 1 (IPv4, 7 bytes) or 2 (IPv6, 19)).
 */
export function clientToServerKey(token: Uint8Array): Uint8Array | null {
  if (token.length !== CONNECT_TOKEN_BYTES) {
    return null;
  }
  const count = token[ADDRESS_COUNT_OFFSET]!;
  if (count < 1 || count > 32) {
    return null;
  }
  let at = ADDRESS_COUNT_OFFSET + 1;
  for (let i = 0; i < count; i++) {
    const kind = token[at];
    if (kind === 1) {
      at += 7;
    } else if (kind === 2) {
      at += 19;
    } else {
      return null;
    }
  }
  return token.slice(at, at + KEY_BYTES);
}

/**
 * Why no login can be made from `token`, or `null` if one can: a public connect token is
 * 2048 bytes and its address list reads (the client-to-server key follows it).
 */
export function connectTokenProblem(token: Uint8Array): string | null {
  if (token.length !== CONNECT_TOKEN_BYTES) {
    return `connect token is ${token.length} bytes, not ${CONNECT_TOKEN_BYTES}`;
  }
  if (clientToServerKey(token) === null) {
    return "the connect token's address list does not read";
  }
  return null;
}

/** The proof for `token` answering `nonce`, under `key`. */
export async function loginProof(key: Uint8Array, nonce: Uint8Array, token: Uint8Array): Promise<Uint8Array> {
  const input = new Uint8Array(PROOF_LABEL.length + nonce.length + token.length);
  input.set(PROOF_LABEL, 0);
  input.set(nonce, PROOF_LABEL.length);
  input.set(token, PROOF_LABEL.length + nonce.length);
  const subtle = (globalThis.crypto as Crypto | undefined)?.subtle;
  if (subtle === undefined) {
    return hmacSha256(key, input);
  }
  // A copy: WebCrypto takes a view of an ArrayBuffer, never of a shared one.
  const hmacKey = await subtle.importKey("raw", new Uint8Array(key), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await subtle.sign("HMAC", hmacKey, input));
}

/**
 * The login answering the server's challenge `nonce`: the token and its proof under the
 * token's own client-to-server key. Rejects if the challenge is not 32 bytes or the token
 * does not read.
 */
export async function loginMessage(token: Uint8Array, nonce: Uint8Array): Promise<Uint8Array> {
  if (nonce.length !== SERVER_NONCE_BYTES) {
    throw new RangeError(`the challenge is ${nonce.length} bytes, not ${SERVER_NONCE_BYTES}`);
  }
  const key = clientToServerKey(token);
  if (key === null) {
    throw new RangeError("the connect token's address list does not read");
  }
  const login = new Uint8Array(LOGIN_BYTES);
  login.set(token, 0);
  login.set(await loginProof(key, nonce, token), CONNECT_TOKEN_BYTES);
  return login;
}
