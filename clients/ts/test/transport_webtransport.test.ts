// The WebTransport transport: its framing and datagrams as pure functions, then a
// WtConnection against a fake session whose control stream and datagrams are real web
// streams, on a virtual clock. No browser, no sleeps.
import { beforeEach, describe, expect, it } from "vitest";

import { type Disconnect, reasonOfCloseCode } from "../src/transport/close-codes.js";
import {
  FrameReader,
  SequenceFilter,
  encodeCloseFrame,
  encodeDataFrame,
  encodeDatagram,
  encodeFrame,
  frameLimit,
  parseCloseFrame,
  parseDatagram,
  sequenceNewer16,
} from "../src/transport/webtransport-frames.js";
import { OUTGOING_HIGH_WATER_MARK, WtConnection } from "../src/transport/webtransport.js";
import { WsConnection } from "../src/transport/websocket.js";
import { DEFAULT_ACCEPTED, FakeWebSocket, FakeWebTransport, NONCE, VirtualClock, expectedLogin, settle, token } from "./fakes.js";
import { fromHex, readRepoJson, toHex } from "./vectors.js";

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");
const bytes = (...values: number[]): Uint8Array => new Uint8Array(values);
const CHANNELS = ["reliable", "unreliable", "unreliable_sequenced"] as const;

describe("control stream frames", () => {
  it("prefixes a frame with its u32 LE length", () => {
    expect(hex(encodeFrame(bytes(1, 2, 3)))).toBe("03000000010203");
    expect(hex(encodeDataFrame(2, new TextEncoder().encode("hi"))), "DATA: channel then message").toBe("03000000026869");
    expect(frameLimit(262_144)).toBe(262_145);
    expect(frameLimit(100), "the 2080-byte login always fits").toBe(2080);
  });

  it("reassembles frames however the stream chunks them", () => {
    const frames = [bytes(0, 9), bytes(1), new Uint8Array(300).fill(7), bytes(2, 1, 2, 3)];
    const stream = new Uint8Array(frames.reduce((n, f) => n + 4 + f.length, 0));
    let at = 0;
    for (const frame of frames) {
      stream.set(encodeFrame(frame), at);
      at += 4 + frame.length;
    }
    // Every way of cutting the stream in two, then byte by byte, then all at once.
    const cuttings: Uint8Array[][] = [];
    for (let cut = 0; cut <= stream.length; cut++) {
      cuttings.push([stream.subarray(0, cut), stream.subarray(cut)]);
    }
    cuttings.push(Array.from(stream, (b) => bytes(b)));
    cuttings.push([stream]);
    for (const chunks of cuttings) {
      const reader = new FrameReader();
      const out = chunks.flatMap((chunk) => reader.push(chunk.slice()));
      expect(out.map(hex), `cut into ${chunks.map((c) => c.length).join("+")} bytes`).toEqual(frames.map(hex));
      expect(reader.pending).toBe(0);
      expect(reader.error).toBeNull();
    }
  });

  it("refuses a frame past the limit from its length prefix alone, and stays failed", () => {
    const reader = new FrameReader(2048);
    const good = encodeFrame(bytes(5));
    // A 1 GiB claim: refused on its 4-byte prefix, before any body is buffered.
    const prefix = new Uint8Array(4);
    new DataView(prefix.buffer).setUint32(0, 1 << 30, true);
    const merged = new Uint8Array(good.length + prefix.length);
    merged.set(good);
    merged.set(prefix, good.length);
    expect(reader.push(merged).map(hex), "the good frame before it still comes out").toEqual(["05"]);
    expect(reader.error).toEqual({ kind: "too_large", length: 1 << 30, limit: 2048 });
    expect(reader.pending, "nothing buffered").toBe(0);
    expect(reader.push(encodeFrame(bytes(1)))).toEqual([]);

    const atLimit = new FrameReader(2048);
    expect(atLimit.push(encodeFrame(new Uint8Array(2048))).length, "exactly the limit is fine").toBe(1);
    expect(atLimit.push(encodeFrame(new Uint8Array(2049)).subarray(0, 4))).toEqual([]);
    expect(atLimit.error?.kind).toBe("too_large");

    const raised = new FrameReader(2048);
    raised.limit = frameLimit(262_144);
    expect(raised.push(encodeFrame(new Uint8Array(262_145))).length).toBe(1);

    const empty = new FrameReader();
    empty.push(bytes(0, 0, 0, 0));
    expect(empty.error).toEqual({ kind: "empty" });
  });

  it("encodes and reads CLOSE frames; the reason is cut to 123 bytes between characters", () => {
    const frame = encodeCloseFrame(4003, "server shutting down");
    expect(hex(frame.subarray(0, 7)), "length 23, the tag, 4003 LE").toBe("17000000ffa30f");
    expect(parseCloseFrame(frame.subarray(4))).toEqual({ code: 4003, reason: "server shutting down" });
    const long = encodeCloseFrame(4001, "é".repeat(100)); // 200 bytes of UTF-8
    const parsed = parseCloseFrame(long.subarray(4));
    expect(parsed?.reason).toBe("é".repeat(61));
    expect(long.length - 4 - 3).toBe(122);
    expect(parseCloseFrame(bytes(0xff, 1)), "no code").toBeNull();
    expect(parseCloseFrame(bytes(0xff, 0xa1, 0x0f, 0xc3)), "not UTF-8").toBeNull();
    expect(parseCloseFrame(new Uint8Array(3 + 124).fill(0x61).fill(0xff, 0, 1)), "reason too long").toBeNull();
  });
});

describe("datagrams", () => {
  it("carry the channel, the sequence of a sequenced channel, then the message", () => {
    expect(hex(encodeDatagram(1, null, bytes(9, 8)))).toBe("010908");
    expect(hex(encodeDatagram(2, 0x1234, bytes(9)))).toBe("02341209");
    expect(parseDatagram(bytes(2, 0x34, 0x12, 9), CHANNELS, 100)).toEqual({ ok: true, channel: 2, sequence: 0x1234, message: bytes(9) });
    expect(parseDatagram(bytes(1), CHANNELS, 100)).toEqual({ ok: true, channel: 1, sequence: null, message: bytes() });
  });

  it("are refused, never fatal, when they cannot be a message", () => {
    expect(parseDatagram(bytes(), CHANNELS, 100)).toEqual({ ok: false, why: "empty" });
    expect(parseDatagram(bytes(0, 1), CHANNELS, 100)).toEqual({ ok: false, why: "reliable_channel" });
    expect(parseDatagram(bytes(3, 1), CHANNELS, 100)).toEqual({ ok: false, why: "unknown_channel" });
    expect(parseDatagram(bytes(2, 1), CHANNELS, 100)).toEqual({ ok: false, why: "short" });
    expect(parseDatagram(new Uint8Array(102).fill(1), CHANNELS, 100)).toEqual({ ok: false, why: "too_large" });
  });

  it("compare sequences with wrapping: newer means 1 to 32767 ahead", () => {
    expect(sequenceNewer16(1, 0)).toBe(true);
    expect(sequenceNewer16(0, 0)).toBe(false);
    expect(sequenceNewer16(0, 65535), "wraps").toBe(true);
    expect(sequenceNewer16(32767, 0)).toBe(true);
    expect(sequenceNewer16(32768, 0), "half way round is older").toBe(false);
    expect(sequenceNewer16(65535, 0)).toBe(false);
  });

  it("drop a sequenced message not newer than the newest of its channel", () => {
    const filter = new SequenceFilter();
    const taken = [5, 3, 5, 6, 65000, 7, 9, 8].map((seq) => filter.accept(2, seq));
    expect(taken).toEqual([true, false, false, true, false, true, true, false]);
    expect(filter.accept(1, 3), "each channel has its own newest").toBe(true);
    const wrapping = new SequenceFilter();
    expect([65534, 65535, 0, 1, 65535].map((seq) => wrapping.accept(2, seq))).toEqual([true, true, true, true, false]);
  });
});

describe("WtConnection", () => {
  beforeEach(() => FakeWebTransport.reset());

  const hash = new Uint8Array(32).map((_, i) => i);

  async function open(options: { silenceTimeoutMs?: number } = {}) {
    const clock = new VirtualClock();
    const connection = new WtConnection({
      url: "https://game.test:4433/wt",
      certificateHash: hash,
      token: token(7),
      WebTransport: FakeWebTransport,
      clock,
      ...options,
    });
    const events: string[] = [];
    const messages: [number, string][] = [];
    let disconnect: Disconnect | null = null;
    connection.on("connected", (params) => events.push(`connected ${params.tickRateHz}`));
    connection.on("message", (channel, message) => messages.push([channel, hex(message)]));
    connection.on("disconnected", (d) => {
      events.push(`disconnected ${d.reason} ${d.code}`);
      disconnect = d;
    });
    const session = FakeWebTransport.last();
    return { clock, connection, session, events, messages, disconnect: () => disconnect };
  }

  async function connected(options: { silenceTimeoutMs?: number } = {}) {
    const setup = await open(options);
    await setup.session.handshake();
    expect(setup.connection.state).toBe("connected");
    return setup;
  }

  it("opens with the certificate hash, answers the challenge with the login, and adopts the parameters", async () => {
    const { session, connection, events } = await open();
    expect(session.url).toBe("https://game.test:4433/wt");
    expect(session.options).toEqual({ requireUnreliable: true, serverCertificateHashes: [{ algorithm: "sha-256", value: hash }] });
    expect(connection.state).toBe("opening");
    session.accept();
    await settle();
    expect(session.streamsOpened, "one control stream").toBe(1);
    expect(session.streamWrites, "nothing written before the server's challenge").toEqual([]);
    expect(connection.state).toBe("handshaking");
    const login = await session.login();
    expect(hex(login), "the token, then HMAC-SHA256 over label, nonce and token").toBe(hex(expectedLogin(token(7), NONCE)));
    expect(session.framesFromClient().length, "the login is one frame").toBe(1);
    expect(hex(session.streamWrites[0]!.subarray(0, 4)), "the login's length prefix: 2080").toBe("20080000");
    expect(connection.state).toBe("handshaking");
    // The parameters arrive in two pieces.
    const accepted = encodeFrame(DEFAULT_ACCEPTED);
    session.sendChunk(accepted.subarray(0, 6));
    await settle();
    expect(connection.state).toBe("handshaking");
    session.sendChunk(accepted.subarray(6));
    await settle();
    expect(events).toEqual(["connected 60"]);
    expect(connection.params?.channels).toEqual(["reliable", "unreliable", "unreliable_sequenced"]);
  });

  it("answers the golden vector's challenge with the golden login", async () => {
    const { vectors } = readRepoJson<{ vectors: { token: string; server_nonce: string; proof: string }[] }>(
      "crates/proto/tests/vectors/stream_login.json",
    );
    const vector = vectors[0]!;
    new WtConnection({ url: "https://game.test/wt", certificateHash: null, token: fromHex(vector.token), WebTransport: FakeWebTransport });
    const session = FakeWebTransport.last();
    session.accept();
    await settle();
    expect(toHex(await session.login(fromHex(vector.server_nonce)))).toBe(vector.token + vector.proof);
  });

  it("takes a challenge that starts with the CLOSE frame's tag for a challenge", async () => {
    const { session, connection } = await open();
    session.accept();
    await settle();
    const nonce = new Uint8Array(32).fill(0xff);
    expect(hex(await session.login(nonce))).toBe(hex(expectedLogin(token(7), nonce)));
    expect(connection.state).toBe("handshaking");
  });

  it.each([
    ["31 bytes", 31],
    ["33 bytes", 33],
    ["the connection parameters", -1],
  ])("closes with 4006 on a first frame that is not a 32-byte challenge: %s", async (_what, length) => {
    const { session, events } = await open();
    session.accept();
    await settle();
    session.sendChunk(encodeFrame(length < 0 ? DEFAULT_ACCEPTED : new Uint8Array(length)));
    await settle();
    expect(events).toEqual(["disconnected protocol_violation 4006"]);
    const frames = session.framesFromClient();
    expect(frames.length, "no login, only the CLOSE frame").toBe(1);
    expect(parseCloseFrame(frames[0]!)?.reason).toMatch(/challenge is \d+ bytes, not 32/);
  });

  it("reports a refused proof (4014) before the parameters", async () => {
    const { session, events, disconnect } = await open();
    session.accept();
    await settle();
    await session.login();
    session.sendChunk(encodeCloseFrame(4014, "bad proof"));
    await settle();
    expect(events).toEqual(["disconnected bad_proof 4014"]);
    expect(disconnect()).toMatchObject({ message: "bad proof", wasConnected: false });
  });

  it("refuses a token whose address list does not read, so no proof can be made", () => {
    expect(
      () => new WtConnection({ url: "https://game.test/wt", certificateHash: null, token: new Uint8Array(2048), WebTransport: FakeWebTransport }),
    ).toThrow(/address list/);
  });

  it("passes no hash for a certificate the browser validates itself", () => {
    new WtConnection({ url: "https://game.test/wt", certificateHash: null, token: token(1), WebTransport: FakeWebTransport });
    expect(FakeWebTransport.last().options).toEqual({ requireUnreliable: true });
  });

  it("sends reliable messages on the stream, unreliable ones as datagrams, sequenced ones numbered from 1", async () => {
    const { connection, session } = await connected();
    expect(connection.send(0, bytes(1, 2))).toBe(true);
    expect(connection.send(1, bytes(3))).toBe(true);
    connection.send(2, bytes(4));
    connection.send(2, bytes(5));
    connection.send(1, bytes());
    await settle();
    expect(session.framesFromClient().slice(1).map(hex)).toEqual(["000102"]);
    expect(session.sentDatagrams.map(hex)).toEqual(["0103", "02010004", "02020005", "01"]);
    expect(connection.counts).toMatchObject({ datagramsSent: 4, framesSent: 2 });
  });

  it("sends datagrams through whichever writable the browser has, or on the stream without one", async () => {
    for (const missing of [["createWritable"], ["writable"], ["createWritable", "writable"]] as const) {
      FakeWebTransport.reset();
      const setup = await open();
      for (const key of missing) delete setup.session.datagrams[key];
      await setup.session.handshake();
      setup.connection.send(1, bytes(7));
      await settle();
      const both = missing.length === 2;
      expect(setup.session.sentDatagrams.map(hex), `without ${missing.join(" and ")}`).toEqual(both ? [] : ["0107"]);
      expect(setup.session.framesFromClient().slice(1).map(hex)).toEqual(both ? ["0107"] : []);
    }
  });

  it("drops datagrams rather than queue them without bound when the browser takes none", async () => {
    const setup = await open();
    // A sink that never finishes a write: everything after the first waits in the stream's queue.
    setup.session.datagrams.createWritable = () => new WritableStream<Uint8Array>({ write: () => new Promise<void>(() => {}) });
    await setup.session.handshake();
    for (let i = 0; i < 200; i++) {
      expect(setup.connection.send(1, bytes(i))).toBe(true);
    }
    // A few: each one waiting is a tick of input delay.
    expect(setup.connection.counts.datagramsSent, "queued up to the bound").toBeLessThanOrEqual(6);
    expect(setup.connection.counts.datagramsNotQueued).toBe(200 - setup.connection.counts.datagramsSent);
  });

  it("asks the browser to take datagrams without a round trip to the page each", async () => {
    const { connection, session } = await connected();
    expect(session.datagrams.outgoingHighWaterMark, "raised from Chromium's 1").toBe(OUTGOING_HIGH_WATER_MARK);
    // A browser without the attribute is left alone (and still sends).
    FakeWebTransport.reset();
    const setup = await open();
    delete setup.session.datagrams.outgoingHighWaterMark;
    await setup.session.handshake();
    setup.connection.send(1, bytes(7));
    await settle();
    expect("outgoingHighWaterMark" in setup.session.datagrams).toBe(false);
    expect(setup.session.sentDatagrams.map(hex)).toEqual(["0107"]);
    expect(connection.state).toBe("connected");
  });

  it("sends an unreliable message too large for a datagram on the stream", async () => {
    const { connection, session } = await connected();
    // maxDatagramSize is 1200: 1199 bytes + the channel byte fit, 1198 + 3 do not.
    connection.send(1, new Uint8Array(1199).fill(1));
    connection.send(1, new Uint8Array(1200).fill(2));
    connection.send(2, new Uint8Array(1197).fill(3));
    connection.send(2, new Uint8Array(1198).fill(4));
    await settle();
    expect(session.sentDatagrams.map((d) => [d[0], d.length])).toEqual([
      [1, 1200],
      [2, 1200],
    ]);
    const frames = session.framesFromClient().slice(1);
    expect(frames.map((f) => [f[0], f[1], f.length])).toEqual([
      [1, 2, 1201],
      [2, 4, 1199],
    ]);
    expect(() => connection.send(1, new Uint8Array(262_145)), "past max_message_size").toThrow(RangeError);
    expect(() => connection.send(3, bytes()), "no such channel").toThrow(RangeError);
  });

  it("delivers stream messages and datagrams, and drops stale, invalid and early datagrams without closing", async () => {
    const { connection, session, messages } = await open();
    session.accept();
    await settle();
    await session.login();
    session.sendDatagram(bytes(1, 0xee));
    await settle();
    expect(connection.drops.early, "a datagram ahead of the parameters").toBe(1);
    // The parameters and a DATA frame in one chunk, then a frame split in three.
    const merged = new Uint8Array([...encodeFrame(DEFAULT_ACCEPTED), ...encodeDataFrame(0, bytes(0xaa))]);
    session.sendChunk(merged);
    const split = encodeDataFrame(0, bytes(1, 2, 3, 4));
    session.sendChunk(split.subarray(0, 2));
    session.sendChunk(split.subarray(2, 6));
    session.sendChunk(split.subarray(6));
    for (const datagram of [bytes(1, 0x10), bytes(2, 5, 0, 0x20), bytes(2, 4, 0, 0x21), bytes(2, 5, 0, 0x22), bytes(2, 6, 0, 0x23)]) {
      session.sendDatagram(datagram);
    }
    for (const datagram of [bytes(), bytes(0, 1), bytes(9, 1), bytes(2, 1)]) {
      session.sendDatagram(datagram);
    }
    await settle();
    // Stream and datagrams interleave in any order; each keeps its own.
    expect(messages.filter(([channel]) => channel === 0)).toEqual([
      [0, "aa"],
      [0, "01020304"],
    ]);
    expect(messages.filter(([channel]) => channel !== 0)).toEqual([
      [1, "10"],
      [2, "20"],
      [2, "23"],
    ]);
    expect(connection.drops).toEqual({ early: 1, stale: 2, invalid: 4 });
    expect(connection.state).toBe("connected");
  });

  it("closes with 4013 on a frame past the limit, from its prefix", async () => {
    const { connection, session, events } = await connected();
    const prefix = new Uint8Array(4);
    new DataView(prefix.buffer).setUint32(0, 262_146, true);
    session.sendChunk(prefix);
    await settle();
    expect(events.at(-1)).toBe("disconnected message_too_large 4013");
    expect(connection.state).toBe("closed");
    const close = session.framesFromClient().at(-1)!;
    expect(parseCloseFrame(close)?.code, "the CLOSE frame says why").toBe(4013);
    expect(session.streamFinished).toBe(true);
    expect(session.closedWith?.closeCode, "and the session closes with the same code").toBe(4013);
  });

  it("closes with 4006 on a DATA frame for an unknown channel or bad parameters", async () => {
    const unknown = await connected();
    unknown.session.sendChunk(encodeDataFrame(5, bytes(1)));
    await settle();
    expect(unknown.events.at(-1)).toBe("disconnected protocol_violation 4006");

    FakeWebTransport.reset();
    const bad = await open();
    bad.session.accept();
    await settle();
    await bad.session.login();
    bad.session.sendChunk(encodeFrame(bytes(1, 2, 3)));
    await settle();
    expect(bad.events).toEqual(["disconnected protocol_violation 4006"]);
  });

  it("reports the server's CLOSE frame, before or after the parameters", async () => {
    const { session, events, disconnect } = await connected();
    session.sendChunk(encodeCloseFrame(4003, "server shutting down"));
    await settle();
    expect(events.at(-1)).toBe("disconnected server_shutdown 4003");
    expect(disconnect()).toMatchObject({ message: "server shutting down", wasConnected: true });

    FakeWebTransport.reset();
    const refused = await open();
    refused.session.accept();
    await settle();
    await refused.session.login();
    refused.session.sendChunk(encodeCloseFrame(4012, "token already used"));
    await settle();
    expect(refused.events).toEqual(["disconnected token_replayed 4012"]);
    expect(refused.disconnect()?.wasConnected).toBe(false);
  });

  it("maps every close code as the WebSocket transport does", async () => {
    for (let code = 4000; code <= 4014; code++) {
      FakeWebTransport.reset();
      const wt = await connected();
      wt.session.sendChunk(encodeCloseFrame(code, "bye"));
      await settle();

      FakeWebSocket.reset();
      const ws = new WsConnection({ url: "ws://game.test/ws", token: token(1), WebSocket: FakeWebSocket });
      let wsReason: string | null = null;
      ws.on("disconnected", (d) => (wsReason = d.reason));
      await FakeWebSocket.last().handshake();
      FakeWebSocket.last().serverClose(code, "bye");

      expect(wt.disconnect()?.reason, `code ${code}`).toBe(wsReason);
      expect(wt.disconnect()?.reason).toBe(reasonOfCloseCode(code));
    }
  });

  it("reports the session's own close code, or a lost connection without one", async () => {
    const kicked = await connected();
    kicked.session.serverClose(4004, "kicked");
    await settle();
    kicked.clock.advance(0);
    expect(kicked.events.at(-1)).toBe("disconnected kicked 4004");

    FakeWebTransport.reset();
    const lost = await connected();
    lost.session.fail("WebTransportError: Connection lost.");
    await settle();
    lost.clock.advance(0);
    expect(lost.disconnect()).toMatchObject({ reason: "connection_lost", code: 1006, wasConnected: true });

    FakeWebTransport.reset();
    const neverUp = await open();
    neverUp.session.fail();
    await settle();
    neverUp.clock.advance(0);
    expect(neverUp.disconnect()).toMatchObject({ reason: "connection_lost", wasConnected: false });
    expect(neverUp.session.streamsOpened).toBe(0);
  });

  it("leaves with a CLOSE frame of 4001, finishes the stream, then closes the session with 4001", async () => {
    const { connection, session, events } = await connected();
    connection.close();
    expect(events.at(-1)).toBe("disconnected requested 4001");
    expect(connection.send(0, bytes(1)), "nothing sent after closing").toBe(false);
    await settle();
    expect(parseCloseFrame(session.framesFromClient().at(-1)!)).toEqual({ code: 4001, reason: "client closed" });
    expect(session.streamFinished).toBe(true);
    expect(session.closedWith).toEqual({ closeCode: 4001, reason: "client closed" });
  });

  it("gives up when the parameters do not come in time, and on a silent server", async () => {
    const slow = await open();
    slow.session.accept();
    await settle();
    await slow.session.login();
    slow.clock.advance(9_999);
    expect(slow.connection.state).toBe("handshaking");
    slow.clock.advance(1);
    expect(slow.events).toEqual(["disconnected handshake_timed_out 4000"]);

    FakeWebTransport.reset();
    const silent = await connected({ silenceTimeoutMs: 5000 });
    silent.session.sendDatagram(bytes(1, 1));
    await settle();
    silent.clock.advance(4000);
    silent.session.sendDatagram(bytes(1, 2));
    await settle();
    silent.clock.advance(4000);
    expect(silent.connection.state, "datagrams count as hearing from the server").toBe("connected");
    silent.clock.advance(2000);
    expect(silent.events.at(-1)).toBe("disconnected server_silent 4000");
    await settle();
    expect(parseCloseFrame(silent.session.framesFromClient().at(-1)!)?.code, "gave up on a live connection: 4002 keeps the seat").toBe(4002);
  });

  it("reports a control stream that ends without a CLOSE frame as a lost connection, keeping the seat", async () => {
    const { session, events } = await connected();
    session.finishStream();
    await settle();
    expect(events.at(-1)).toBe("disconnected connection_lost 1006");
    expect(parseCloseFrame(session.framesFromClient().at(-1)!)?.code, "told the server: timed out, seat kept").toBe(4002);
    expect(session.closedWith?.closeCode).toBe(4002);
  });

  it("reports a session the browser refuses to create as a lost connection", async () => {
    class Throwing extends FakeWebTransport {
      constructor(url: string) {
        super(url);
        throw new TypeError("Invalid serverCertificateHashes");
      }
    }
    const connection = new WtConnection({ url: "https://x/wt", certificateHash: hash, token: token(1), WebTransport: Throwing });
    let reason: string | null = null;
    connection.on("disconnected", (d) => (reason = d.reason));
    await settle();
    expect(reason).toBe("connection_lost");
  });
});
