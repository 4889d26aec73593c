// The admin API (`/api/admin/*`, crates/server/src/runtime/admin.rs) as the page uses it:
// every request carries the bearer token, and every answer is checked before it is trusted.

/** `GET /api/admin/stats`. */
export interface Stats {
  phase: string;
  players: { udp: number; ws: number; webtransport: number };
  rooms: number;
  packets_in_per_second: number;
  packets_out_per_second: number;
  bytes_in_per_second: number;
  bytes_out_per_second: number;
  tick_p50_ms: number;
  tick_p99_ms: number;
  tick_max_ms: number;
  queue_drops: number;
}

/**
 * One room of `GET /api/admin/rooms`; `locked`, `label` (what matchmaking filters match, by
 * key) and `metadata` only from servers with room control.
 */
export interface Room {
  id: number;
  kind: string;
  players: number;
  capacity: number;
  shard: number;
  tick_p50_ms: number | null;
  tick_p99_ms: number | null;
  /** Counters since the room was created: rates come from two readings. */
  messages_in: number;
  bytes_in: number;
  messages_out: number;
  bytes_out: number;
  locked?: boolean;
  label?: Record<string, string>;
  metadata?: string;
}

/** One player of `GET /api/admin/players`; RTT and loss where the transport measures them (UDP). */
export interface Player {
  id: number;
  name: string;
  transport: string;
  room: number | null;
  rtt_ms: number | null;
  loss: number | null;
}

/** The server refused the token (401), or refuses this address for a while (429). */
/** What one room kind's replicated worlds have sent since the server started (`/api/admin/replication`). */
export interface ReplicationKind {
  kind: string;
  snapshots: number;
  /** Bytes, estimated from one send in eight. */
  bytes: number;
  /** By entity kind and field, largest first (`_framing`: ids, kinds, masks; `_roster`; `_snapshot`: headers). */
  rows: { entity: string; field: string; bytes: number }[];
}

export class Refused extends Error {
  constructor(
    message: string,
    readonly retryAfterSeconds: number | null,
  ) {
    super(message);
  }
}

/** Any other answer that is not a success; `status` 404 for an unknown id or route. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export class AdminApi {
  constructor(
    private readonly token: string,
    private readonly baseUrl = "",
  ) {}

  stats(): Promise<Stats> {
    return this.request("GET", "/api/admin/stats");
  }

  rooms(): Promise<Room[]> {
    return this.request("GET", "/api/admin/rooms");
  }

  players(): Promise<Player[]> {
    return this.request("GET", "/api/admin/players");
  }

  replication(): Promise<{ kinds: ReplicationKind[] }> {
    return this.request("GET", "/api/admin/replication");
  }

  kick(player: number): Promise<unknown> {
    return this.request("POST", `/api/admin/kick/${player}`);
  }

  say(text: string): Promise<unknown> {
    return this.request("POST", "/api/admin/say", { text });
  }

  drain(): Promise<{ phase: string }> {
    return this.request("POST", "/api/admin/drain");
  }

  /** Room control (`lock`, `unlock`, `dispose`); a server without it answers 404. */
  roomAction(room: number, action: "lock" | "unlock" | "dispose"): Promise<unknown> {
    return this.request("POST", `/api/admin/rooms/${room}/${action}`);
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    if (body !== undefined) {
      headers["content-type"] = "application/json";
    }
    const init: RequestInit = { method, headers, cache: "no-store" };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
    }
    const response = await fetch(`${this.baseUrl}${path}`, init);
    const text = await response.text();
    let json: unknown = null;
    try {
      json = text === "" ? null : JSON.parse(text);
    } catch {
      // Not JSON (a proxy's page, a route this server lacks): the status says enough.
    }
    const error = typeof json === "object" && json !== null && "error" in json ? String(json.error) : `HTTP ${response.status}`;
    if (response.status === 401) {
      throw new Refused("the server refused this token", null);
    }
    if (response.status === 429) {
      const retry = Number(response.headers.get("retry-after"));
      throw new Refused(error, Number.isFinite(retry) ? retry : null);
    }
    if (!response.ok) {
      throw new ApiError(response.status, error);
    }
    return json as T;
  }
}
