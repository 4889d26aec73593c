// Matchmaking, endpoint choice and reconnection that keeps the seat, on a virtual clock
// with a fake fetch and a fake WebSocket: no server, no sleeps.
import { beforeEach, describe, expect, it } from "vitest";

import { TickwireClient } from "../src/client.js";
import { DecodeError } from "../src/wire/errors.js";
import { ReconnectPolicy, classifyDisconnect } from "../src/netcode/reconnect.js";
import { MatchmakeError, matchmake, parseAnswer, webSocketUrl } from "../src/transport/matchmaking.js";
import { FakeWebSocket, VirtualClock, answerJson, expectedLogin, token } from "./fakes.js";

/** A fetch that answers from a script and records each request body. */
function fakeFetch(script: (body: Record<string, unknown>, call: number) => { status: number; json: unknown }) {
  const requests: Record<string, unknown>[] = [];
  const fetch = (async (url: string, init: RequestInit) => {
    expect(url).toBe("http://game.test:8080/api/matchmake");
    expect(init.method).toBe("POST");
    const body = JSON.parse(init.body as string) as Record<string, unknown>;
    requests.push(body);
    const { status, json } = script(body, requests.length);
    if (status === 0) {
      throw new TypeError("network down");
    }
    return new Response(JSON.stringify(json), { status });
  }) as typeof globalThis.fetch;
  return { fetch, requests };
}

/** Lets the fetch promise chain settle (no time passes on the virtual clock). */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) {
    await Promise.resolve();
  }
  await new Promise((resolve) => setImmediate(resolve));
}

beforeEach(() => FakeWebSocket.reset());

describe("matchmake", () => {
  it("sends a new room's options, the label filter and create as the server reads them", async () => {
    const { fetch, requests } = fakeFetch(() => ({ status: 200, json: answerJson(1) }));
    await matchmake(
      { kind: "c4", create: true, options: { board: "7x6" }, filter: 'label.mode = "ranked"' },
      { baseUrl: "http://game.test:8080", fetch },
    );
    // The field names of crates/proto's MatchmakeRequest, which refuses fields it does not know.
    expect(requests).toEqual([{ kind: "c4", create: true, options: { board: "7x6" }, filter: 'label.mode = "ranked"' }]);
  });

  it("posts the request and converts the answer", async () => {
    const { fetch, requests } = fakeFetch(() => ({ status: 200, json: answerJson(1) }));
    const answer = await matchmake({ kind: "arena", name: "Ada" }, { baseUrl: "http://game.test:8080", fetch });
    expect(requests).toEqual([{ kind: "arena", name: "Ada" }]);
    expect(answer).toMatchObject({ playerId: 42, room: 3, session: "session-of-42", expiresAt: 1_800_000_000 });
    expect(answer.token).toEqual(token(1));
  });

  it.each([
    [400, "bad_request"],
    [401, "unauthorized"],
    [404, "not_found"],
    [409, "room_full"],
    [429, "rate_limited"],
    [503, "unavailable"],
    [500, "http"],
  ] as const)("maps status %i to %s", async (status, kind) => {
    const { fetch } = fakeFetch(() => ({ status, json: { error: "nope" } }));
    const error = await matchmake({ kind: "arena" }, { baseUrl: "http://game.test:8080", fetch }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MatchmakeError);
    expect(error).toMatchObject({ kind, status });
  });

  it("refuses answers that are not what the API returns", () => {
    expect(() => parseAnswer(answerJson(1, { token: "AAAA" }))).toThrow(/2048 bytes/);
    expect(() => parseAnswer(answerJson(1, { player_id: 2 ** 60 }))).toThrow(/player_id/);
    expect(() => parseAnswer({ ...answerJson(1), endpoints: "x" })).toThrow(MatchmakeError);
    expect(() => parseAnswer(null)).toThrow(MatchmakeError);
  });

  it("uses wss on an https page", () => {
    const endpoints = { udp: "", ws: "ws://game.test:8080/ws", wss: "wss://game.test:8443/ws" };
    expect(webSocketUrl(endpoints, { protocol: "http:", host: "game.test:8080" })).toBe("ws://game.test:8080/ws");
    expect(webSocketUrl(endpoints, { protocol: "https:", host: "game.test:8443" })).toBe("wss://game.test:8443/ws");
    // No TLS listener on the server: the https page's own origin terminates TLS.
    expect(webSocketUrl({ ...endpoints, wss: null }, { protocol: "https:", host: "play.example" })).toBe(
      "wss://play.example/ws",
    );
  });
});

describe("ReconnectPolicy", () => {
  it("backs off exponentially up to the cap, with jitter in [d/2, d]", () => {
    const top = new ReconnectPolicy({}, () => 0);
    const bottom = new ReconnectPolicy({}, () => 1);
    const highs = Array.from({ length: 8 }, () => top.next("transient"));
    const lows = Array.from({ length: 8 }, () => bottom.next("transient"));
    expect(highs).toEqual([250, 500, 1000, 2000, 4000, 8000, 8000, 8000]);
    expect(lows).toEqual([125, 250, 500, 1000, 2000, 4000, 4000, 4000]);
  });

  it("gives up after its attempts, and at once on a final reason", () => {
    const policy = new ReconnectPolicy({ maxAttempts: 3 }, () => 0.5);
    expect([policy.next("transient"), policy.next("transient"), policy.next("transient")]).not.toContain(null);
    expect(policy.next("transient")).toBeNull();
    policy.reset();
    expect(policy.next("transient")).toBe(187.5);
    expect(policy.next("final")).toBeNull();
  });

  it("retries a shutting-down server only a few times", () => {
    const policy = new ReconnectPolicy({}, () => 0);
    const delays = Array.from({ length: 4 }, () => policy.next(classifyDisconnect("server_shutdown")));
    expect(delays).toEqual([250, 500, 1000, null]);
  });

  it("never retries a kick, a replacement, a protocol violation or a refused proof", () => {
    for (const reason of ["kicked", "connected_elsewhere", "protocol_violation", "bad_proof", "requested"] as const) {
      expect(classifyDisconnect(reason), reason).toBe("final");
    }
  });
});

describe("TickwireClient", () => {
  function setup(script: Parameters<typeof fakeFetch>[0]) {
    const clock = new VirtualClock();
    const { fetch, requests } = fakeFetch(script);
    const client = new TickwireClient({
      request: { kind: "arena", name: "Ada" },
      baseUrl: "http://game.test:8080",
      fetch,
      WebSocket: FakeWebSocket,
      clock,
      page: { protocol: "http:", host: "game.test:8080" },
      random: () => 0,
    });
    const log: string[] = [];
    client.on("matched", (a) => log.push(`matched reconnect=${a.reconnect}`));
    client.on("connected", () => log.push("connected"));
    client.on("disconnected", (d, retry) => log.push(`disconnected ${d.reason} retry=${retry}`));
    client.on("matchmakeFailed", (e, retry) => log.push(`matchmake ${e.kind} retry=${retry}`));
    client.on("failed", (f) => log.push(`failed ${f.kind}`));
    return { clock, client, requests, log };
  }

  async function accept(): Promise<FakeWebSocket> {
    const socket = FakeWebSocket.last();
    await socket.handshake();
    return socket;
  }

  it("reconnects after a lost connection with the saved session and a fresh token", async () => {
    const { clock, client, requests, log } = setup((_body, call) => ({ status: 200, json: answerJson(call) }));
    client.start();
    await settle();
    const first = await accept();
    expect(first.sent[0]).toEqual(expectedLogin(token(1)));
    expect(client.state).toBe("connected");

    first.serverClose(1006);
    expect(client.state).toBe("waiting");
    clock.advance(249);
    await settle();
    expect(requests.length, "no attempt before the backoff delay").toBe(1);
    clock.advance(1);
    await settle();
    expect(requests[1]).toEqual({ session: "session-of-42", kind: "arena" });
    const second = await accept();
    expect(second.sent[0], "each connection uses a fresh token").toEqual(expectedLogin(token(2)));
    expect(log).toEqual([
      "matched reconnect=false",
      "connected",
      "disconnected connection_lost retry=250",
      "matched reconnect=true",
      "connected",
    ]);
  });

  it("backs off while matchmaking fails, and starts over after a success", async () => {
    let down = true;
    const { clock, client, log } = setup((_b, call) => (down && call > 1 ? { status: 0, json: null } : { status: 200, json: answerJson(call) }));
    client.start();
    await settle();
    (await accept()).serverClose(4002);
    for (const delay of [250, 500, 1000]) {
      clock.advance(delay);
      await settle();
    }
    down = false;
    clock.advance(2000);
    await settle();
    await accept();
    expect(log).toEqual([
      "matched reconnect=false",
      "connected",
      "disconnected timed_out retry=250",
      "matchmake network retry=500",
      "matchmake network retry=1000",
      "matchmake network retry=2000",
      "matched reconnect=true",
      "connected",
    ]);
    // The backoff starts over for the next failure.
    FakeWebSocket.last().serverClose(1006);
    expect(log.at(-1)).toBe("disconnected connection_lost retry=250");
  });

  it("does not retry a shutting-down server forever", async () => {
    const { clock, client, log } = setup((_b, call) => (call === 1 ? { status: 200, json: answerJson(1) } : { status: 503, json: { error: "draining" } }));
    client.start();
    await settle();
    (await accept()).serverClose(4003, "server shutting down");
    for (let i = 0; i < 10; i++) {
      clock.advance(10_000);
      await settle();
    }
    expect(log).toEqual([
      "matched reconnect=false",
      "connected",
      "disconnected server_shutdown retry=250",
      "matchmake unavailable retry=500",
      "matchmake unavailable retry=1000",
      "matchmake unavailable retry=null",
      "failed matchmake",
    ]);
    expect(client.state).toBe("closed");
    expect(clock.nextTimeout(), "nothing left scheduled").toBeNull();
  });

  it("stops on a kick, and on close() sends a close frame and never retries", async () => {
    const kicked = setup(() => ({ status: 200, json: answerJson(1) }));
    kicked.client.start();
    await settle();
    (await accept()).serverClose(4004);
    expect(kicked.log.slice(-2)).toEqual(["disconnected kicked retry=null", "failed disconnect"]);

    FakeWebSocket.reset();
    const leaving = setup(() => ({ status: 200, json: answerJson(1) }));
    leaving.client.start();
    await settle();
    const socket = await accept();
    leaving.client.close();
    expect(socket.closedWith?.code).toBe(1000);
    leaving.clock.advance(60_000);
    await settle();
    expect(leaving.requests.length).toBe(1);
  });

  it("catches a listener that throws, reports and counts it, and carries on", async () => {
    const { client } = setup(() => ({ status: 200, json: answerJson(1) }));
    const heard: number[] = [];
    const reported: string[] = [];
    client.on("message", () => {
      throw new DecodeError("truncated", "a game decoder meeting an operator's text");
    });
    client.on("message", (channel) => heard.push(channel));
    client.on("listenerError", (event, error) => reported.push(`${event}: ${(error as DecodeError).kind}`));
    client.start();
    await settle();
    const socket = await accept();
    // Would throw out of the socket's message handler (an uncaught exception, fatal to Node).
    expect(() => socket.receive(new Uint8Array([0, 104, 105]))).not.toThrow();
    socket.receive(new Uint8Array([2, 1]));
    expect(heard, "the other listener still heard both").toEqual([0, 2]);
    expect(reported).toEqual(["message: truncated", "message: truncated"]);
    expect(client.listenerErrors).toBe(2);
    expect(client.state).toBe("connected");
  });

  it("writes a thrown error to the console when nobody listens for listenerError", async () => {
    const { client } = setup(() => ({ status: 200, json: answerJson(1) }));
    client.on("message", () => {
      throw new Error("boom");
    });
    const errors: unknown[][] = [];
    const original = console.error;
    console.error = (...args: unknown[]) => errors.push(args);
    try {
      client.start();
      await settle();
      const socket = await accept();
      socket.receive(new Uint8Array([0, 1]));
    } finally {
      console.error = original;
    }
    expect(errors.length).toBe(1);
    expect(String(errors[0]![0])).toContain('"message" listener threw');
    expect(client.listenerErrors).toBe(1);
  });

  it("counts packets and bytes both ways", async () => {
    const { clock, client } = setup(() => ({ status: 200, json: answerJson(1) }));
    client.start();
    await settle();
    const socket = await accept();
    client.send(1, new Uint8Array(6));
    socket.receive(new Uint8Array([2, 1, 2, 3]));
    const report = client.stats.report(clock.now());
    // Out: the login and the message; in: the challenge, the accepted message and the message.
    expect(report).toMatchObject({ packetsOut: 2, bytesOut: 2080 + 7, packetsIn: 3, bytesIn: 32 + 17 + 4 });
  });
});
