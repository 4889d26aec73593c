// The arena client over WebTransport against a scripted server on a virtual clock: the
// welcome on the control stream, snapshots as sequenced datagrams of which one is lost and
// one arrives late, inputs out as datagrams. A lost datagram costs that snapshot and nothing
// more; a late one is dropped, never applied over a newer one. No sockets, no sleeps.
import { beforeEach, describe, expect, it } from "vitest";

import { ArenaClient } from "../arena/src/client.js";
import { decodeClientInput, encodeServerMessage } from "../arena/src/messages.js";
import { encodeDataFrame, encodeDatagram } from "../src/transport/webtransport-frames.js";
import { COURTYARD as map, WELCOME as welcome, fullSnapshot } from "./arena_fixtures.js";
import { ENDPOINTS, FakeWebSocket, FakeWebTransport, VirtualClock, answerJson, settle } from "./fakes.js";

beforeEach(() => {
  FakeWebSocket.reset();
  FakeWebTransport.reset();
});

describe("ArenaClient over WebTransport", () => {
  it("plays on datagrams: a lost snapshot costs only itself, a late one is dropped", async () => {
    const clock = new VirtualClock();
    const wt = { url: "https://game.test:4433/wt", cert_sha256: null };
    const answer = answerJson(1, { endpoints: { ...ENDPOINTS, wt } });
    const fetch = (async () => new Response(JSON.stringify(answer), { status: 200 })) as typeof globalThis.fetch;
    const arena = new ArenaClient({ name: "Ada", map, baseUrl: "http://game.test:8080", fetch, WebTransport: FakeWebTransport, clock });
    const applied: number[] = [];
    arena.on("snapshot", (snapshot) => applied.push(snapshot.tick));
    arena.start();
    await settle();
    const session = FakeWebTransport.last();
    await session.handshake();
    session.sendChunk(encodeDataFrame(0, encodeServerMessage(welcome)));
    await settle();
    expect(arena.client.transport).toBe("webtransport");

    // Ticks 1 to 6 on channel 2 (sequenced), numbered as the server numbers them. Tick 3's
    // datagram is lost; tick 2's arrives after tick 4's.
    const datagram = (tick: number): Uint8Array => encodeDatagram(2, tick, fullSnapshot(tick, null, 10 + tick, 5, []));
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
    expect(session.framesFromClient().length, "only the login on the stream").toBe(1);
  });
});
