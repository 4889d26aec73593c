/**
 * The matchmaking HTTP client: `POST /api/matchmake` (`crates/server/src/runtime/api.rs`)
 * returns a seat, a single-use connect token and the endpoints to use it on.
 *
 * ```ts
 * const answer = await matchmake({ kind: "arena", name: "Ada" });
 * const url = webSocketUrl(answer.endpoints); // wss:// when the page is https
 * const wt = answer.endpoints.wt;             // { url: "https://host:4433/wt", certSha256 } or null
 * ```
 */

import { CONNECT_TOKEN_BYTES, connectTokenProblem } from "./login.js";

/** What to ask for: a room kind to join or create, or one room; a session from an earlier answer. */
export interface MatchmakeRequest {
  /** Join-or-create a room of this kind (not with `room`). */
  kind?: string;
  /** Join this room (not with `kind`). */
  room?: number;
  /** A guest's display name. */
  name?: string;
  /** The `session` of an earlier answer: the same player again, and their seat if still held. */
  session?: string;
  /** An identity signed by the game's backend (`auth.mode = "shared_secret"`). */
  identity?: { id: number; name: string; expires: number; signature: string };
  /** With `kind`: always create a new room of that kind rather than join one. */
  create?: boolean;
  /**
   * Options for a room this request creates (at most 16; keys of `a-z0-9_-` up to 32 bytes,
   * values up to 128), which the room's `create` checks. Ignored when joining a room that
   * exists. A room that refuses them answers 400 with its reason.
   */
  options?: Record<string, string>;
  /** With `kind`: only rooms whose label matches, e.g. `label.mode = "ranked"` (`and`, `=`, `!=`). */
  filter?: string;
}

/** Where the server takes connections. */
export interface Endpoints {
  /** The UDP address (`host:port`), for native clients. */
  udp: string;
  /** `ws://host:port/ws`. */
  ws: string;
  /** `wss://host:port/ws` when the server runs TLS itself, else `null`. */
  wss: string | null;
  /** The WebTransport endpoint, or `null` when the server has it disabled. */
  wt: WebTransportEndpoint | null;
}

/** Where and how to reach the server over WebTransport. */
export interface WebTransportEndpoint {
  /** `https://host:port/wt`. */
  url: string;
  /**
   * The SHA-256 of the server's self-signed development certificate (32 bytes), for the
   * browser's `serverCertificateHashes`; `null` when the server has a certificate browsers
   * validate as usual.
   */
  certSha256: Uint8Array | null;
}

/** A seat. */
export interface MatchmakeAnswer {
  /** The player's id (below 2^53). */
  playerId: number;
  /** The name others see. */
  name: string;
  /** The room id. */
  room: number;
  /** The room's kind. */
  kind: string;
  /** True when this is the player's held seat coming back. */
  reconnect: boolean;
  /** Proof of being this player, for the next matchmake (reconnection). */
  session: string;
  /** The connect token: the first WebSocket message or WebTransport frame. Single use. */
  token: Uint8Array;
  /** Unix seconds after which the token is refused. */
  expiresAt: number;
  /** Where to connect. */
  endpoints: Endpoints;
}

/** Why matchmaking failed. */
export type MatchmakeErrorKind =
  /** 400: the request was malformed (a bad name, both kind and room). */
  | "bad_request"
  /** 401: the identity or session does not verify. */
  | "unauthorized"
  /** 404: no such room or kind, or no seat held for a session-only request. */
  | "not_found"
  /** 409: the room is full, or the player is placed elsewhere. */
  | "room_full"
  /** 429: too many requests from this address. */
  | "rate_limited"
  /** 503: the server is draining or could not create the room. */
  | "unavailable"
  /** Another HTTP error. */
  | "http"
  /** The request did not reach the server, or no answer came back. */
  | "network"
  /** The answer is not what the API returns. */
  | "bad_answer";

/** A matchmaking failure; `status` is the HTTP status when there was one. */
export class MatchmakeError extends Error {
  override readonly name = "MatchmakeError";
  readonly kind: MatchmakeErrorKind;
  readonly status: number | null;

  constructor(kind: MatchmakeErrorKind, status: number | null, message: string) {
    super(message);
    this.kind = kind;
    this.status = status;
  }
}

/** Options of {@link matchmake}. */
export interface MatchmakeOptions {
  /** The server's HTTP origin, e.g. `https://game.example`. Default: the page's origin. */
  baseUrl?: string;
  /** Default: `globalThis.fetch`. */
  fetch?: typeof globalThis.fetch;
  /** Aborts the request. */
  signal?: AbortSignal;
}

const STATUS_KINDS: ReadonlyMap<number, MatchmakeErrorKind> = new Map([
  [400, "bad_request"],
  [401, "unauthorized"],
  [404, "not_found"],
  [409, "room_full"],
  [429, "rate_limited"],
  [503, "unavailable"],
]);

/** Asks the server for a seat. Fails only with a {@link MatchmakeError}. */
export async function matchmake(request: MatchmakeRequest, options: MatchmakeOptions = {}): Promise<MatchmakeAnswer> {
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const base = options.baseUrl ?? globalThis.location?.origin;
  if (base === undefined) {
    throw new MatchmakeError("network", null, "no baseUrl given and no page origin to default to");
  }
  let response: Response;
  try {
    response = await fetchImpl(new URL("/api/matchmake", base).toString(), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(request),
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (error) {
    throw new MatchmakeError("network", null, `matchmaking request failed: ${String(error)}`);
  }
  let body: unknown;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const detail = isRecord(body) && typeof body.error === "string" ? body.error : response.statusText;
    throw new MatchmakeError(STATUS_KINDS.get(response.status) ?? "http", response.status, `matchmaking: ${response.status} ${detail}`);
  }
  return parseAnswer(body);
}

/** Checks and converts the API's JSON answer. */
export function parseAnswer(body: unknown): MatchmakeAnswer {
  const bad = (what: string): MatchmakeError => new MatchmakeError("bad_answer", null, `matchmaking answer: ${what}`);
  if (!isRecord(body) || !isRecord(body.endpoints)) {
    throw bad("not an object with endpoints");
  }
  const { player_id, name, room, kind, reconnect, session, token, expires_at, endpoints } = body;
  for (const [field, value] of [["player_id", player_id], ["room", room], ["expires_at", expires_at]] as const) {
    // JSON numbers past 2^53 - 1 lose digits; the server keeps these below that.
    if (!Number.isSafeInteger(value) || (value as number) < 0) {
      throw bad(`${field} is not a safe non-negative integer`);
    }
  }
  if (typeof name !== "string" || typeof kind !== "string" || typeof session !== "string") {
    throw bad("name, kind and session must be strings");
  }
  if (typeof reconnect !== "boolean" || typeof token !== "string") {
    throw bad("reconnect must be a boolean and token a string");
  }
  const { udp, ws, wss } = endpoints;
  if (typeof udp !== "string" || typeof ws !== "string" || !(wss === null || wss === undefined || typeof wss === "string")) {
    throw bad("endpoints must be strings");
  }
  const wt = parseWebTransportEndpoint(endpoints.wt);
  if (wt === undefined) {
    throw bad("endpoints.wt must be null or { url: https URL, cert_sha256: null or 64 hex digits }");
  }
  const tokenBytes = decodeBase64(token);
  if (tokenBytes === null || tokenBytes.length !== CONNECT_TOKEN_BYTES) {
    throw bad(`token is not ${CONNECT_TOKEN_BYTES} bytes of base64`);
  }
  const problem = connectTokenProblem(tokenBytes);
  if (problem !== null) {
    throw bad(problem);
  }
  return {
    playerId: player_id as number,
    name,
    room: room as number,
    kind,
    reconnect,
    session,
    token: tokenBytes,
    expiresAt: expires_at as number,
    endpoints: { udp, ws, wss: wss ?? null, wt },
  };
}

/** The page a client runs in: what decides between ws and wss. */
export interface PageLocation {
  /** `"https:"` or `"http:"`. */
  protocol: string;
  /** `host[:port]` of the page. */
  host: string;
}

/**
 * The WebSocket URL to use: `wss` when the page is https (a browser refuses `ws://` from
 * an https page), else `ws`. An https page whose server has no TLS listener of its own is
 * taken to sit behind a TLS proxy on the page's origin: `wss://<page host>/ws`.
 */
export function webSocketUrl(endpoints: Pick<Endpoints, "ws" | "wss">, page: PageLocation | undefined = globalThis.location): string {
  if (page?.protocol !== "https:") {
    return endpoints.ws;
  }
  return endpoints.wss ?? `wss://${page.host}/ws`;
}

/** The `wt` endpoint: `null` when absent or null, `undefined` when malformed. */
function parseWebTransportEndpoint(value: unknown): WebTransportEndpoint | null | undefined {
  if (value === null || value === undefined) {
    return null;
  }
  if (!isRecord(value) || typeof value.url !== "string" || !value.url.startsWith("https://")) {
    return undefined;
  }
  const hash = value.cert_sha256;
  if (hash === null || hash === undefined) {
    return { url: value.url, certSha256: null };
  }
  const bytes = typeof hash === "string" ? decodeHex(hash) : null;
  return bytes !== null && bytes.length === 32 ? { url: value.url, certSha256: bytes } : undefined;
}

/** Bytes of a hex string (either case), or `null` if it is not one. */
export function decodeHex(text: string): Uint8Array | null {
  if (text.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(text)) {
    return null;
  }
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) {
    out[i] = Number.parseInt(text.slice(2 * i, 2 * i + 2), 16);
  }
  return out;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function decodeBase64(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) {
    return null;
  }
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) {
    out[i] = binary.charCodeAt(i);
  }
  return out;
}
