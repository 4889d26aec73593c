// The WebSocket handshake and framing of docs/PROTOCOL.md "WebSocket transport", against a
// fake socket.
import { beforeEach, describe, expect, it, vi } from "vitest";

import type { Disconnect } from "../src/transport/close-codes.js";
import { reasonOfCloseCode } from "../src/transport/close-codes.js";
import { parseConnectionParams } from "../src/transport/params.js";
import { WsConnection, type WsConnectionOptions } from "../src/transport/websocket.js";
import { DEFAULT_ACCEPTED, FakeWebSocket, NONCE, VirtualClock, expectedLogin, settle, token } from "./fakes.js";
import { fromHex, readRepoJson, toHex } from "./vectors.js";

function connect(options: Partial<WsConnectionOptions> = {}) {
  const clock = new VirtualClock();
  const connection = new WsConnection({ url: "ws://game.test:8080/ws", token: token(7), WebSocket: FakeWebSocket, clock, ...options });
  const socket = FakeWebSocket.last();
  const messages: [number, string][] = [];
  const disconnects: Disconnect[] = [];
  connection.on("message", (channel, bytes) => messages.push([channel, new TextDecoder().decode(bytes)]));
  connection.on("disconnected", (d) => disconnects.push(d));
  return { clock, connection, socket, messages, disconnects };
}

async function connected(options: Partial<WsConnectionOptions> = {}) {
  const setup = connect(options);
  await setup.socket.handshake();
  expect(setup.connection.state).toBe("connected");
  return setup;
}

beforeEach(() => FakeWebSocket.reset());


describe("connection parameters", () => {
  it("reads the documented default accepted message", () => {
    expect(parseConnectionParams(DEFAULT_ACCEPTED)).toEqual({
      tickRateHz: 60,
      keepaliveMs: 100,
      timeoutMs: 10_000,
      mtu: 1200,
      maxMessageSize: 262_144,
      channels: ["reliable", "unreliable", "unreliable_sequenced"],
    });
  });

  it("refuses any other length and every broken bound", () => {
    const with_ = (i: number, v: number) => {
      const b = DEFAULT_ACCEPTED.slice();
      b[i] = v;
      return b;
    };
    expect(parseConnectionParams(DEFAULT_ACCEPTED.subarray(0, 16))).toBeNull();
    expect(parseConnectionParams(new Uint8Array([...DEFAULT_ACCEPTED, 0]))).toBeNull();
    expect(parseConnectionParams(with_(0, 0)), "tick rate 0").toBeNull();
    expect(parseConnectionParams(with_(0, 129)), "tick rate 129").toBeNull();
    expect(parseConnectionParams(with_(16, 3)), "channel kind 3").toBeNull();
    expect(parseConnectionParams(with_(8, 0x10)), "mtu 4272").toBeNull();
    expect(parseConnectionParams(new Uint8Array(14)), "no channels").toBeNull();
  });
});

describe("WsConnection", () => {
  it("answers the server's challenge with the 2080-byte login, then adopts the parameters", async () => {
    const { connection, socket } = connect();
    expect(socket.url).toBe("ws://game.test:8080/ws");
    expect(socket.binaryType).toBe("arraybuffer");
    expect(connection.state).toBe("opening");
    socket.open();
    expect(socket.sent, "nothing before the challenge").toEqual([]);
    expect(connection.state).toBe("handshaking");
    const login = await socket.login(NONCE);
    expect(login.length).toBe(2080);
    expect(toHex(login), "the token, then HMAC-SHA256 over label, nonce and token").toBe(toHex(expectedLogin(token(7), NONCE)));
    expect(socket.sent.length, "the login is one message").toBe(1);
    expect(connection.state).toBe("handshaking");
    expect(connection.send(0, new Uint8Array([1])), "nothing goes out before accepted").toBe(false);
    let params: unknown = null;
    connection.on("connected", (p) => (params = p));
    socket.receive(DEFAULT_ACCEPTED);
    expect(connection.state).toBe("connected");
    expect(params).toMatchObject({ tickRateHz: 60, channels: ["reliable", "unreliable", "unreliable_sequenced"] });
  });

  it("answers the golden vector's challenge with the golden login", async () => {
    const { vectors } = readRepoJson<{ vectors: { token: string; server_nonce: string; proof: string }[] }>(
      "crates/proto/tests/vectors/stream_login.json",
    );
    const vector = vectors[0]!;
    const { socket } = connect({ token: fromHex(vector.token) });
    expect(toHex(await socket.login(fromHex(vector.server_nonce)))).toBe(vector.token + vector.proof);
  });

  it("answers each connection's own challenge", async () => {
    const first = connect();
    const other = Uint8Array.from({ length: 32 }, (_, i) => i);
    const second = connect();
    expect(toHex(await first.socket.login(NONCE))).toBe(toHex(expectedLogin(token(7), NONCE)));
    expect(toHex(await second.socket.login(other))).toBe(toHex(expectedLogin(token(7), other)));
  });

  it.each([
    ["31 bytes", new Uint8Array(31)],
    ["33 bytes", new Uint8Array(33)],
    ["an empty message", new Uint8Array(0)],
    ["the accepted message", DEFAULT_ACCEPTED],
    ["a text message", "x".repeat(32)],
  ])("closes with a protocol violation on a first message that is not a 32-byte challenge: %s", async (_what, data) => {
    const { socket, disconnects } = connect();
    socket.open();
    socket.receive(data);
    expect(disconnects).toEqual([expect.objectContaining({ reason: "protocol_violation", wasConnected: false })]);
    expect(disconnects[0]!.message).toMatch(typeof data === "string" ? /text/ : /challenge is \d+ bytes, not 32/);
    expect(socket.closedWith?.code).toBe(1002);
    await Promise.resolve();
    expect(socket.sent, "no login").toEqual([]);
  });

  it("closes with a protocol violation on a message while it makes its proof", async () => {
    const sign = vi.spyOn(crypto.subtle, "sign");
    const { connection, socket, disconnects } = connect();
    socket.open();
    socket.receive(NONCE);
    socket.receive(DEFAULT_ACCEPTED);
    expect(disconnects).toEqual([expect.objectContaining({ reason: "protocol_violation", message: "a message before the login was sent" })]);
    // The proof asked for before the close finishes afterwards.
    await vi.waitUntil(() => sign.mock.results.length > 0);
    await sign.mock.results[0]!.value;
    await settle();
    sign.mockRestore();
    expect(socket.sent, "no login on a closed connection").toEqual([]);
    expect(connection.state).toBe("closed");
  });

  it("reports a refused proof (4014) before the accepted message", async () => {
    const { socket, disconnects } = connect();
    await socket.login();
    socket.serverClose(4014, "bad proof");
    expect(disconnects).toEqual([{ reason: "bad_proof", code: 4014, message: "bad proof", wasConnected: false }]);
  });

  it("frames data messages as channel byte + message, both ways", async () => {
    const { connection, socket, messages } = await connected();
    expect(connection.send(2, new TextEncoder().encode("hi"))).toBe(true);
    expect(Array.from(socket.sent[1]!)).toEqual([0x02, 0x68, 0x69]);
    expect(connection.send(1, new Uint8Array(0))).toBe(true);
    expect(Array.from(socket.sent[2]!)).toEqual([0x01]);
    socket.receive(new Uint8Array([0x00, 0x6f, 0x6b]));
    socket.receive(new Uint8Array([0x02]));
    expect(messages).toEqual([
      [0, "ok"],
      [2, ""],
    ]);
  });

  it("refuses to send on a channel the server did not open, or past the size limit", async () => {
    const { connection } = await connected();
    expect(() => connection.send(3, new Uint8Array(1))).toThrow(RangeError);
    expect(() => connection.send(0, new Uint8Array(262_145))).toThrow(/exceeds max 262144/);
  });

  it("refuses a token that is not 2048 bytes", () => {
    expect(() => new WsConnection({ url: "ws://x/ws", token: new Uint8Array(10), WebSocket: FakeWebSocket })).toThrow(
      /2048/,
    );
    expect(() => new WsConnection({ url: "ws://x/ws", token: new Uint8Array(2048), WebSocket: FakeWebSocket }), "no address, so no key").toThrow(
      /address list/,
    );
  });

  it.each([
    ["a text message", "hello"],
    ["an empty message", new Uint8Array(0)],
    ["an unknown channel", new Uint8Array([3, 1])],
  ])("closes with a protocol violation on %s from the server", async (_what, data) => {
    const { socket, disconnects } = await connected();
    socket.receive(data);
    expect(disconnects).toEqual([expect.objectContaining({ reason: "protocol_violation", wasConnected: true })]);
    expect(socket.closedWith?.code).toBe(1002);
  });

  it("closes with 1009 on a message past the server's own size limit", async () => {
    const { socket, disconnects } = await connected();
    const max = 256 * 1024; // DEFAULT_ACCEPTED's max_message_size
    socket.receive(new Uint8Array(1 + max)); // on the limit: delivered
    expect(disconnects).toEqual([]);
    socket.receive(new Uint8Array(2 + max));
    expect(disconnects).toEqual([expect.objectContaining({ reason: "message_too_large", wasConnected: true })]);
    expect(socket.closedWith?.code).toBe(1009);
  });

  it("closes on an accepted message that breaks a bound", async () => {
    const { socket, disconnects } = connect();
    await socket.login();
    socket.receive(new Uint8Array([0, 1, 2]));
    expect(disconnects[0]).toMatchObject({ reason: "protocol_violation", wasConnected: false });
  });

  it.each([
    [4002, "timed_out"],
    [4003, "server_shutdown"],
    [4004, "kicked"],
    [4005, "slow_client"],
    [4006, "protocol_violation"],
    [4007, "server_full"],
    [4008, "connected_elsewhere"],
    [4009, "handshake_timed_out"],
    [4010, "bad_token"],
    [4011, "token_expired"],
    [4012, "token_replayed"],
    [4013, "message_too_large"],
    [4014, "bad_proof"],
    [1002, "protocol_violation"],
    [1007, "protocol_violation"],
    [1009, "message_too_large"],
    [1006, "connection_lost"],
    [1000, "requested"],
  ] as const)("reports close code %i as %s, once", async (code, reason) => {
    expect(reasonOfCloseCode(code)).toBe(reason);
    const { socket, disconnects, connection } = await connected();
    socket.serverClose(code, "because");
    socket.serverClose(code, "again");
    expect(disconnects).toEqual([{ reason, code, message: "because", wasConnected: true }]);
    expect(connection.state).toBe("closed");
  });

  it("gives a room's refusal of the join, before the accepted message, in the room's words", async () => {
    const { socket, disconnects } = connect();
    await socket.login();
    socket.serverClose(4004, "cheaters may not play");
    expect(disconnects).toEqual([{ reason: "kicked", code: 4004, message: "cheaters may not play", wasConnected: false }]);
  });

  it("leaves with a close frame of 1000 when asked", async () => {
    const { connection, socket, disconnects } = await connected();
    connection.close();
    expect(socket.closedWith?.code).toBe(1000);
    expect(disconnects).toEqual([expect.objectContaining({ reason: "requested" })]);
  });

  it("gives up a handshake the server does not finish in time", () => {
    const { clock, socket, disconnects } = connect({ handshakeTimeoutMs: 3000 });
    socket.open();
    clock.advance(2999);
    expect(disconnects).toEqual([]);
    clock.advance(1);
    expect(disconnects).toEqual([expect.objectContaining({ reason: "handshake_timed_out", wasConnected: false })]);
  });

  it("gives up on a silent server with 4002, which keeps the seat, never a goodbye", async () => {
    const { clock, socket, disconnects } = await connected({ silenceTimeoutMs: 2000 });
    for (let i = 0; i < 10; i++) {
      clock.advance(1500);
      socket.receive(new Uint8Array([1, i]));
    }
    expect(disconnects, "messages keep it alive").toEqual([]);
    // A main thread blocked past the limit runs the timer before the queued message: the
    // silence is confirmed a moment later, and the message saves the connection.
    clock.advance(2100);
    socket.receive(new Uint8Array([1, 99]));
    clock.advance(300);
    expect(disconnects, "a late-dispatched message is not silence").toEqual([]);
    clock.advance(2000 + 300);
    expect(disconnects).toEqual([expect.objectContaining({ reason: "server_silent", wasConnected: true })]);
    expect(socket.closedWith?.code, "4002: the server holds the seat").toBe(4002);
    socket.serverClose(4008);
    expect(disconnects.length, "the stale socket's later close is not reported").toBe(1);
  });

  it("has no silence limit by default (an idle room may send nothing)", async () => {
    const { clock, disconnects } = await connected();
    clock.advance(60_000);
    expect(disconnects).toEqual([]);
  });
});
