// The arena client against a scripted server on a virtual clock: welcome → snapshots →
// inputs with acks at the tick rate → chat → hostile bytes survived → a reconnection that
// keeps the avatar and continues the input sequence. No sockets, no sleeps.
import { beforeEach, describe, expect, it } from "vitest";

import { ArenaClient, type ArenaStatus } from "../arena/src/client.js";
import {
  type ClientInput,
  decodeClientInput,
  decodeClientMessage,
  encodeServerMessage,
} from "../arena/src/messages.js";
import { COURTYARD as map, WELCOME as welcome, fullSnapshot } from "./arena_fixtures.js";
import { FakeWebSocket, VirtualClock, answerJson, settle } from "./fakes.js";
import { fromHex, readRepoJson } from "./vectors.js";

const snapshots = readRepoJson<{ vectors: { name: string; hex: string; decoded: { tick: number } }[] }>(
  "crates/arena/tests/vectors/snapshots.json",
).vectors;

function frame(channel: number, bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(bytes.length + 1);
  out[0] = channel;
  out.set(bytes, 1);
  return out;
}

/** The client's data messages on `channel` since `from` (the login is not one). */
function sent(socket: FakeWebSocket, channel: number, from = 0): Uint8Array[] {
  return socket.sent
    .slice(from)
    .filter((m) => m.length !== 2080 && m[0] === channel)
    .map((m) => m.subarray(1));
}

beforeEach(() => FakeWebSocket.reset());

describe("ArenaClient", () => {
  it("plays: welcome, roster, snapshots, acked inputs, chat, hostile bytes, reconnection", async () => {
    const clock = new VirtualClock();
    const requests: Record<string, unknown>[] = [];
    const fetch = (async (_url: string, init: RequestInit) => {
      requests.push(JSON.parse(init.body as string) as Record<string, unknown>);
      return new Response(JSON.stringify(answerJson(requests.length)), { status: 200 });
    }) as typeof globalThis.fetch;
    const statuses: ArenaStatus[] = [];
    const arena = new ArenaClient({
      name: "Ada",
      map,
      baseUrl: "http://game.test:8080",
      fetch,
      WebSocket: FakeWebSocket,
      clock,
      page: { protocol: "http:", host: "game.test:8080" },
      random: () => 0.5,
    });
    arena.on("status", (status) => statuses.push(status));
    const problems: string[] = [];
    arena.on("problem", (p) => problems.push(p));
    arena.start();
    await settle();
    expect(requests[0]).toEqual({ kind: "arena", name: "Ada" });

    const socket = FakeWebSocket.last();
    await socket.handshake();
    // Nothing is sent before the welcome and the first snapshot.
    arena.update(clock.now(), { moveX: 1, moveY: 0, aim: 0, buttons: 0 });
    expect(sent(socket, 1)).toEqual([]);
    socket.receive(frame(0, encodeServerMessage(welcome)));
    for (const [id, name] of [[0, "Ada"], [1, "Bo"], [2, "Cy"], [3, "Di"], [4, "Ed"]] as const) {
      socket.receive(frame(0, encodeServerMessage({ type: "Player", id, name })));
    }
    socket.receive(frame(0, encodeServerMessage({ type: "Scores", scores: [{ id: 1, kills: 2, deaths: 0, score: 20 }] })));
    expect(arena.you).toBe(0);
    expect(arena.status.state).toBe("connecting");

    // The golden snapshots, one per tick.
    for (const vector of snapshots) {
      clock.advance(1000 / 60);
      socket.receive(frame(2, fromHex(vector.hex)));
    }
    expect(arena.status.state).toBe("playing");
    expect(arena.problems.badSnapshots).toBe(0);
    expect(arena.scores).toEqual([{ id: 1, kills: 2, deaths: 0, score: 20 }]);
    const newest = snapshots.at(-1)!.decoded.tick;

    // Inputs: one per tick, acking the newest snapshot, newest command first.
    const before = socket.sent.length;
    for (let i = 0; i < 6; i++) {
      arena.update(clock.now(), { moveX: 1, moveY: 0, aim: 0.5, buttons: 0 });
      clock.advance(1000 / 60);
    }
    const inputs: ClientInput[] = sent(socket, 1, before).map(decodeClientInput);
    expect(inputs.length).toBe(6);
    expect(inputs.every((input) => input.ack === newest)).toBe(true);
    expect(inputs.at(-1)!.inputs.map((c) => c.sequence)).toEqual([5, 4, 3]);
    expect(inputs.at(-1)!.inputs[0]).toMatchObject({ moveX: 1, moveY: 0 });

    // The others are drawn (interpolated, a little in the past), named from the roster.
    clock.advance(200);
    const view = arena.view(clock.now());
    expect(view.players.length).toBeGreaterThan(0);
    expect(view.players.every((p) => p.name !== `#${p.id}`)).toBe(true);
    expect(view.me).toMatchObject({ id: 0, name: "Ada", alive: true });
    // Predicted ahead of the server's word while inputs are in flight.
    expect(view.me!.x).toBeGreaterThan(view.me!.serverX);

    // Chat out and back.
    expect(arena.say("  hello arena  ")).toBe(true);
    expect(sent(socket, 0).map(decodeClientMessage).at(-1)).toEqual({ type: "Chat", text: "hello arena" });
    socket.receive(frame(0, encodeServerMessage({ type: "Chat", from: 0, text: "hello arena" })));
    socket.receive(frame(0, encodeServerMessage({ type: "Chat", from: 2, text: "hi Ada" })));
    expect(arena.chat.map((l) => [l.name, l.text, l.mine])).toEqual([
      ["Ada", "hello arena", true],
      ["Cy", "hi Ada", false],
    ]);

    // Hostile bytes are counted and dropped; nothing throws, the connection stays.
    socket.receive(frame(0, Uint8Array.of(0xff, 0xff)));
    socket.receive(frame(2, Uint8Array.of(1, 2, 3)));
    socket.receive(frame(2, new Uint8Array(300).fill(0xff)));
    expect(arena.problems.badMessages).toBe(1);
    expect(arena.problems.badSnapshots).toBe(2);
    expect(problems.length).toBe(3);
    expect(arena.status.state).toBe("playing");

    // The link dies: the client says so, matchmakes with its session and is welcomed back.
    socket.serverClose(1006);
    expect(arena.status).toMatchObject({ state: "reconnecting", reason: "connection_lost" });
    clock.advance(10_000);
    await settle();
    expect(requests[1]).toEqual({ session: "session-of-42", kind: "arena" });
    const again = FakeWebSocket.last();
    expect(again).not.toBe(socket);
    await again.handshake();
    again.receive(frame(0, encodeServerMessage(welcome)));
    expect(statuses.at(-1)).toMatchObject({ state: "connecting", reconnect: true });
    // The server applied input 40 before the link died: the next one is 41.
    again.receive(frame(2, fullSnapshot(500, 40, 12, 7, [1, 3])));
    expect(arena.status.state).toBe("playing");
    arena.update(clock.now(), { moveX: 0, moveY: 1, aim: 0, buttons: 1 });
    const resumed = sent(again, 1).map(decodeClientInput);
    expect(resumed.length).toBe(1);
    expect(resumed[0]).toMatchObject({ ack: 500 });
    expect(resumed[0]!.inputs.map((c) => c.sequence)).toEqual([41]);
    expect(arena.view(clock.now()).me).toMatchObject({ serverX: 12, serverY: 7 });
  });

  it("ends with a reason when the server refuses the player for good", async () => {
    const clock = new VirtualClock();
    const fetch = (async () => new Response(JSON.stringify({ error: "bad name" }), { status: 400 })) as typeof globalThis.fetch;
    const arena = new ArenaClient({ name: "", map, baseUrl: "http://game.test:8080", fetch, WebSocket: FakeWebSocket, clock });
    arena.start();
    await settle();
    expect(arena.status).toMatchObject({ state: "ended", reason: "bad_request" });
  });

  it("tells the player the server is shutting down, then gives up after a few attempts", async () => {
    const clock = new VirtualClock();
    let calls = 0;
    const fetch = (async () => {
      calls += 1;
      return calls === 1
        ? new Response(JSON.stringify(answerJson(1)), { status: 200 })
        : new Response(JSON.stringify({ error: "draining" }), { status: 503 });
    }) as typeof globalThis.fetch;
    const arena = new ArenaClient({
      name: "Ada",
      map,
      baseUrl: "http://game.test:8080",
      fetch,
      WebSocket: FakeWebSocket,
      clock,
      random: () => 0,
    });
    arena.start();
    await settle();
    const socket = FakeWebSocket.last();
    await socket.handshake();
    socket.serverClose(4003, "server shutting down");
    expect(arena.status).toMatchObject({ state: "reconnecting", reason: "server_shutdown" });
    for (let i = 0; i < 10 && arena.status.state !== "ended"; i++) {
      clock.advance(60_000);
      await settle();
    }
    expect(arena.status).toMatchObject({ state: "ended", reason: "unavailable" });
  });
});

describe("ArenaClient input pacing", () => {
  it("sends one input per tick, catches up a few after a slow frame, and skips the rest", async () => {
    const clock = new VirtualClock();
    const fetch = (async () => new Response(JSON.stringify(answerJson(1)), { status: 200 })) as typeof globalThis.fetch;
    const arena = new ArenaClient({
      name: "Ada",
      map,
      baseUrl: "http://game.test:8080",
      fetch,
      WebSocket: FakeWebSocket,
      clock,
      silenceTimeoutMs: null,
    });
    arena.start();
    await settle();
    const socket = FakeWebSocket.last();
    await socket.handshake();
    socket.receive(frame(0, encodeServerMessage(welcome)));
    socket.receive(frame(2, fullSnapshot(1, null, 20, 15, [])));
    const input = { moveX: 0, moveY: 0, aim: 0, buttons: 0 };
    const count = (): number => sent(socket, 1).length;
    // 60 frames at 60 Hz: 60 inputs.
    for (let i = 0; i < 60; i++) {
      arena.update(clock.now(), input);
      clock.advance(1000 / 60);
    }
    expect(count()).toBe(60);
    // A 50 ms frame: three ticks came due, three inputs.
    clock.advance(50 - 1000 / 60);
    arena.update(clock.now(), input);
    expect(count()).toBe(63);
    // A 2 s stall: only the catch-up allowance (4) goes out, not 120 inputs.
    clock.advance(2000);
    arena.update(clock.now(), input);
    expect(count()).toBe(67);
    // And the pace is back to one per tick.
    clock.advance(1000 / 60);
    arena.update(clock.now(), input);
    expect(count()).toBe(68);
  });
});
