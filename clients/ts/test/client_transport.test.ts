// Which transport the client picks, and its fallback from WebTransport to WebSocket with a
// fresh token, on a virtual clock with a fake fetch, a fake WebSocket and a fake
// WebTransport: no server, no sleeps.
import { beforeEach, describe, expect, it } from "vitest";

import { type TickwireClientOptions, TickwireClient } from "../src/client.js";
import { parseAnswer } from "../src/transport/matchmaking.js";
import { encodeCloseFrame } from "../src/transport/webtransport-frames.js";
import { ENDPOINTS, FakeWebSocket, FakeWebTransport, VirtualClock, answerJson, expectedLogin, settle, token } from "./fakes.js";

const HASH = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/** The answer to request `n`, offering WebTransport as `wt` says. */
function answerWith(n: number, wt: unknown = { url: "https://game.test:4433/wt", cert_sha256: HASH }) {
  return answerJson(n, { endpoints: { ...ENDPOINTS, wt } });
}

function setup(options: Partial<TickwireClientOptions> = {}, wt?: unknown) {
  const clock = new VirtualClock();
  const requests: Record<string, unknown>[] = [];
  const fetch = (async (_url: string, init: RequestInit) => {
    requests.push(JSON.parse(init.body as string) as Record<string, unknown>);
    return new Response(JSON.stringify(wt === undefined ? answerWith(requests.length) : answerWith(requests.length, wt)), { status: 200 });
  }) as typeof globalThis.fetch;
  const client = new TickwireClient({
    request: { kind: "arena", name: "Ada" },
    baseUrl: "http://game.test:8080",
    fetch,
    WebSocket: FakeWebSocket,
    WebTransport: FakeWebTransport,
    clock,
    page: { protocol: "http:", host: "game.test:8080" },
    random: () => 0,
    ...options,
  });
  const log: string[] = [];
  client.on("matched", (a) => log.push(`matched reconnect=${a.reconnect}`));
  client.on("connected", (_params, transport) => log.push(`connected ${transport}`));
  client.on("fallback", (why) => log.push(`fallback ${why.reason}`));
  client.on("disconnected", (d, retry) => log.push(`disconnected ${d.reason} retry=${retry}`));
  client.on("failed", (f) => log.push(`failed ${f.kind}`));
  return { clock, client, requests, log };
}

/** The newest WebTransport session accepts, challenges, takes the login and sends the default parameters. */
async function acceptWt(): Promise<FakeWebTransport> {
  const session = FakeWebTransport.last();
  await session.handshake();
  return session;
}

/** The newest WebSocket opens, challenges, takes the login and accepts with the default parameters. */
async function acceptWs(): Promise<FakeWebSocket> {
  const socket = FakeWebSocket.last();
  await socket.handshake();
  return socket;
}

beforeEach(() => {
  FakeWebSocket.reset();
  FakeWebTransport.reset();
});

describe("matchmaking's WebTransport endpoint", () => {
  it("reads the URL and the certificate hash as bytes", () => {
    const wt = parseAnswer(answerWith(1)).endpoints.wt;
    expect(wt?.url).toBe("https://game.test:4433/wt");
    expect(Buffer.from(wt!.certSha256!).toString("hex")).toBe(HASH);
    expect(parseAnswer(answerWith(1, { url: "https://h/wt", cert_sha256: null })).endpoints.wt).toEqual({ url: "https://h/wt", certSha256: null });
    expect(parseAnswer(answerWith(1, null)).endpoints.wt, "disabled on the server").toBeNull();
    const { wt: _absent, ...older } = answerWith(1).endpoints as Record<string, unknown>;
    expect(parseAnswer({ ...answerWith(1), endpoints: older }).endpoints.wt, "a server without it").toBeNull();
  });

  it("refuses a malformed endpoint", () => {
    for (const wt of [{ url: "http://h/wt", cert_sha256: null }, { url: "https://h/wt", cert_sha256: "abc" }, { url: "https://h/wt", cert_sha256: HASH.slice(2) }, "x"]) {
      expect(() => parseAnswer(answerWith(1, wt)), JSON.stringify(wt)).toThrow(/endpoints.wt/);
    }
  });
});

describe("transport choice", () => {
  it("prefers WebTransport when the browser has it and the server offers it", async () => {
    const { client, log } = setup();
    client.start();
    await settle();
    expect(FakeWebSocket.instances).toHaveLength(0);
    const session = await acceptWt();
    expect(session.url).toBe("https://game.test:4433/wt");
    expect(session.options?.serverCertificateHashes?.[0]?.algorithm).toBe("sha-256");
    expect(session.framesFromClient()[0]).toEqual(expectedLogin(token(1)));
    expect(log).toEqual(["matched reconnect=false", "connected webtransport"]);
    expect(client.transport).toBe("webtransport");
    expect(client.send(1, new Uint8Array([9])), "sends as a datagram").toBe(true);
    await settle();
    expect(session.sentDatagrams).toEqual([new Uint8Array([1, 9])]);
  });

  it("uses WebSocket without WebTransport in the browser, without a wt endpoint, or when told to", async () => {
    for (const [options, wt] of [
      [{ WebTransport: null }, undefined],
      [{}, null],
      [{ transport: "websocket" as const }, undefined],
    ] as const) {
      FakeWebSocket.reset();
      FakeWebTransport.reset();
      const { client, log } = setup(options, wt);
      client.start();
      await settle();
      await acceptWs();
      expect(log, JSON.stringify(options)).toEqual(["matched reconnect=false", "connected websocket"]);
      expect(FakeWebTransport.instances).toHaveLength(0);
      client.close();
    }
  });

  it("falls back to WebSocket with a fresh token when the session cannot be opened", async () => {
    const { clock, client, requests, log } = setup();
    client.start();
    await settle();
    FakeWebTransport.last().fail("WebTransportError: Opening handshake failed.");
    await settle();
    clock.advance(0);
    await settle();
    expect(requests, "matchmade again with the session for a fresh token").toEqual([
      { kind: "arena", name: "Ada" },
      { session: "session-of-42", kind: "arena" },
    ]);
    const socket = await acceptWs();
    expect(socket.sent[0], "the WebSocket uses the second token, never the first").toEqual(expectedLogin(token(2)));
    expect(log).toEqual(["matched reconnect=false", "fallback connection_lost", "matched reconnect=true", "connected websocket"]);
    expect(client.transport).toBe("websocket");
    expect(client.webTransportFailed?.reason).toBe("connection_lost");
  });

  it("falls back when the parameters do not come within the WebTransport timeout", async () => {
    const { clock, client, requests, log } = setup();
    client.start();
    await settle();
    FakeWebTransport.last().accept();
    await settle();
    clock.advance(2_999);
    await settle();
    expect(requests.length, "not before the timeout").toBe(1);
    clock.advance(1);
    await settle();
    expect(requests.length).toBe(2);
    await acceptWs();
    expect(log).toEqual(["matched reconnect=false", "fallback handshake_timed_out", "matched reconnect=true", "connected websocket"]);
  });

  it("stays on WebSocket after a fallback, through reconnections", async () => {
    const { clock, client, log } = setup();
    client.start();
    await settle();
    FakeWebTransport.last().fail();
    await settle();
    clock.advance(0);
    await settle();
    (await acceptWs()).serverClose(1006);
    clock.advance(250);
    await settle();
    await acceptWs();
    expect(FakeWebTransport.instances, "one WebTransport attempt in all").toHaveLength(1);
    expect(log.slice(-3)).toEqual(["disconnected connection_lost retry=250", "matched reconnect=true", "connected websocket"]);
  });

  it("reconnects over WebTransport after a connected session drops, with a fresh token", async () => {
    const { clock, client, log } = setup();
    client.start();
    await settle();
    const first = await acceptWt();
    first.fail("WebTransportError: Connection lost.");
    await settle();
    clock.advance(0);
    expect(log.at(-1)).toBe("disconnected connection_lost retry=250");
    clock.advance(250);
    await settle();
    const second = await acceptWt();
    expect(second).not.toBe(first);
    expect(second.framesFromClient()[0]).toEqual(expectedLogin(token(2)));
    expect(log.slice(-2)).toEqual(["matched reconnect=true", "connected webtransport"]);
  });

  it("does not fall back when the server refuses the player itself", async () => {
    const { clock, client, log } = setup();
    client.start();
    await settle();
    const session = FakeWebTransport.last();
    session.accept();
    await settle();
    await session.login();
    session.sendChunk(encodeCloseFrame(4007, "server full"));
    await settle();
    expect(log.at(-1), "a full server is as full over WebSocket").toBe("disconnected server_full retry=250");
    clock.advance(250);
    await settle();
    expect(FakeWebTransport.instances).toHaveLength(2);
    expect(FakeWebSocket.instances).toHaveLength(0);
  });

  it("never falls back when WebTransport is forced, and fails when it is missing", async () => {
    const forced = setup({ transport: "webtransport" });
    forced.client.start();
    await settle();
    FakeWebTransport.last().fail();
    await settle();
    forced.clock.advance(0);
    expect(forced.log.at(-1)).toBe("disconnected connection_lost retry=250");
    forced.clock.advance(250);
    await settle();
    expect(FakeWebTransport.instances).toHaveLength(2);
    expect(FakeWebSocket.instances).toHaveLength(0);
    forced.client.close();

    const missing = setup({ transport: "webtransport" }, null);
    missing.client.start();
    await settle();
    expect(missing.log).toEqual(["matched reconnect=false", "disconnected transport_unavailable retry=null", "failed disconnect"]);
  });

  it("leaves a WebTransport session with 4001 on close()", async () => {
    const { client } = setup();
    client.start();
    await settle();
    const session = await acceptWt();
    client.close();
    await settle();
    expect(session.closedWith?.closeCode).toBe(4001);
    expect(client.state).toBe("closed");
  });
});
