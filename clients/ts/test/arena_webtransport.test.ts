// The arena client over WebTransport against a scripted server on a virtual clock: the
// welcome on the control stream, snapshots as sequenced datagrams of which one is lost and
// one arrives late, inputs out as datagrams. A lost datagram costs that snapshot and nothing
// more; a late one is dropped, never applied over a newer one. No sockets, no sleeps.
import { beforeEach, describe, expect, it } from "vitest";

import { ArenaClient } from "../src/arena/client.js";
import type { ArenaMapInfo } from "../src/arena/map.js";
import { type ServerMessage, decodeClientInput, encodeServerMessage } from "../src/arena/messages.js";
import { aabb } from "../src/arena/movement.js";
import { encodeDataFrame, encodeDatagram, encodeFrame } from "../src/transport/webtransport-frames.js";
import { BitWriter } from "../src/wire/index.js";
import { DEFAULT_ACCEPTED, FakeWebSocket, FakeWebTransport, VirtualClock, settle, token } from "./fakes.js";

const map: ArenaMapInfo = {
  name: "courtyard.tmx",
  width: 40,
  height: 30,
  walls: [aabb(0, 0, 40, 1), aabb(0, 1, 1, 29), aabb(39, 1, 40, 29), aabb(0, 29, 40, 30)],
  spawns: [{ x: 4.5, y: 4.5 }],
  teleports: [],
};

const welcome: ServerMessage = {
  type: "Welcome",
  protocol: 2,
  you: 0,
  map: "courtyard.tmx",
  mapWidth: 40,
  mapHeight: 30,
  tickRateHz: 60,
  tick: 0,
  maxHealth: 100,
  maxSpeed: 6,
  playerRadius: Math.fround(0.4),
  snapshotHistory: 32,
};

/** A full snapshot (no baseline) of the recipient alone at `x, y`. */
function fullSnapshot(tick: number, x: number, y: number): Uint8Array {
  const w = new BitWriter();
  w.writeUint(tick, 32);
  w.writeBool(false); // no baseline
  w.writeBool(false); // no last input
  w.writeBool(true); // alive
  w.writeF32(x);
  w.writeF32(y);
  w.writeUint(512, 10); // aim
  w.writeUint(100, 7); // health
  for (let i = 0; i < 3; i++) w.writeVarint(0);
  w.writeUint(0, 8); // destroys
  w.writeUint(0, 8); // creates
  w.writeUint(0, 8); // updates
  w.writeUint(0, 6); // bullets
  return w.finish();
}

beforeEach(() => {
  FakeWebSocket.reset();
  FakeWebTransport.reset();
});

describe("ArenaClient over WebTransport", () => {
  it("plays on datagrams: a lost snapshot costs only itself, a late one is dropped", async () => {
    const clock = new VirtualClock();
    const fetch = (async () =>
      new Response(
        JSON.stringify({
          player_id: 42,
          name: "Ada",
          room: 3,
          kind: "arena",
          reconnect: false,
          session: "session-of-42",
          token: Buffer.from(token(1)).toString("base64"),
          expires_at: 1_800_000_000,
          endpoints: { udp: "127.0.0.1:7777", ws: "ws://game.test:8080/ws", wss: null, wt: { url: "https://game.test:4433/wt", cert_sha256: null } },
        }),
        { status: 200 },
      )) as typeof globalThis.fetch;
    const arena = new ArenaClient({ name: "Ada", map, baseUrl: "http://game.test:8080", fetch, WebTransport: FakeWebTransport, clock });
    const applied: number[] = [];
    arena.on("snapshot", (snapshot) => applied.push(snapshot.tick));
    arena.start();
    await settle();
    const session = FakeWebTransport.last();
    session.accept();
    await settle();
    session.sendChunk(encodeFrame(DEFAULT_ACCEPTED));
    session.sendChunk(encodeDataFrame(0, encodeServerMessage(welcome)));
    await settle();
    expect(arena.client.transport).toBe("webtransport");

    // Ticks 1 to 6 on channel 2 (sequenced), numbered as the server numbers them. Tick 3's
    // datagram is lost; tick 2's arrives after tick 4's.
    const datagram = (tick: number): Uint8Array => encodeDatagram(2, tick, fullSnapshot(tick, 10 + tick, 5));
    for (const tick of [1, 4, 2, 5, 6]) {
      clock.advance(1000 / 60);
      session.sendDatagram(datagram(tick));
      await settle();
    }
    expect(applied, "every snapshot but the lost one and the late one, in order").toEqual([1, 4, 5, 6]);
    expect(arena.problems).toMatchObject({ badSnapshots: 0, orphanSnapshots: 0 });
    expect(arena.status.state).toBe("playing");
    expect(arena.view(clock.now()).me).toMatchObject({ serverX: 16, serverY: 5 });

    // Inputs go out as datagrams on channel 1 (unreliable), acking the newest tick.
    for (let i = 0; i < 3; i++) {
      arena.update(clock.now(), { moveX: 1, moveY: 0, aim: 0, buttons: 0 });
      clock.advance(1000 / 60);
    }
    await settle();
    const inputs = session.sentDatagrams.filter((d) => d[0] === 1).map((d) => decodeClientInput(d.subarray(1)));
    expect(inputs.length).toBe(3);
    expect(inputs.every((input) => input.ack === 6)).toBe(true);
    expect(session.framesFromClient().length, "only the token on the stream").toBe(1);
  });
});
