// The tag page: the SDK's client, the generated mirror of the room's runners, a canvas.
import { InterpolatedMirror, Mirror, MirrorError, TickwireClient, encode, ackMessage } from "@tickwire/client";
import { SteerCodec } from "./generated/messages.js";
import { TagWorld } from "./generated/world.js";

const FIELD = 40; // metres, as the room's
const SCALE = 15; // pixels a metre
const STATE = 2; // snapshots come, and acknowledgements go, on channel 2
const INPUT = 1; // steering goes on channel 1
const SESSION = "tag.session";

const canvas = document.querySelector("canvas")!;
const draw = canvas.getContext("2d")!;
const status = document.getElementById("status")!;
const rosterList = document.getElementById("roster")!;
canvas.width = canvas.height = FIELD * SCALE;

// A reloaded tab comes back to its seat with the session it was given.
const session = sessionStorage.getItem(SESSION);
const name = new URLSearchParams(location.search).get("name") ?? undefined;
const client = new TickwireClient({ request: session ? { kind: "tag", session } : { kind: "tag", ...(name ? { name } : {}) } });
const mirror = new Mirror(TagWorld);
let view = new InterpolatedMirror(mirror, { tickRateHz: 30, delayMs: 100 });
Object.assign(window, { tag: { mirror, client } }); // what the browser test reads

client.on("matched", (answer) => sessionStorage.setItem(SESSION, answer.session));
client.on("connected", (params) => {
  view = new InterpolatedMirror(mirror, { tickRateHz: params.tickRateHz, delayMs: 100 });
});
client.on("disconnected", (why, retryInMs) => {
  setStatus("disconnected", retryInMs === null ? `Disconnected: ${why.reason}` : "Reconnecting…");
});
client.on("message", (channel, bytes) => {
  if (channel !== STATE) return;
  try {
    client.send(STATE, ackMessage(view.apply(performance.now(), bytes)));
  } catch (error) {
    if (!(error instanceof MirrorError)) throw error; // a stale snapshot: the next repairs it
  }
  if (mirror.rosterChanges.length > 0) showRoster();
});
// The roster and the status follow who is it and how often each was tagged.
mirror.onAdd("Runner", showRoster);
mirror.onRemove("Runner", showRoster);
mirror.onFieldChange("Runner", "it", showRoster);
mirror.onFieldChange("Runner", "tagged", showRoster);

function setStatus(state: string, text: string): void {
  status.dataset.state = state;
  status.textContent = text;
}

function runnerOf(seat: number | undefined) {
  for (const { fields } of mirror.entities()) if (fields.seat === seat) return fields;
  return undefined;
}

function showRoster(): void {
  const items = [...mirror.roster()].map(({ seat, member }) => {
    const runner = runnerOf(seat);
    const item = document.createElement("li");
    item.dataset.connected = String(member.connected);
    item.dataset.it = String(runner?.it ?? false);
    item.textContent = `${member.name}${member.you ? " (you)" : ""} · tagged ${runner?.tagged ?? 0}`;
    return item;
  });
  rosterList.replaceChildren(...items);
  const me = runnerOf(mirror.mySeat);
  if (me) setStatus(me.it ? "it" : "running", me.it ? "You are it: tag someone!" : "Run!");
}

// Steering: the keys held, sent 20 times a second (unreliable: the newest wins).
const held = new Set<string>();
addEventListener("keydown", (event) => held.add(event.key));
addEventListener("keyup", (event) => held.delete(event.key));
addEventListener("blur", () => held.clear());
const axis = (minus: string[], plus: string[]) =>
  Number(plus.some((key) => held.has(key))) - Number(minus.some((key) => held.has(key)));
setInterval(() => {
  const steer = { x: axis(["ArrowLeft", "a"], ["ArrowRight", "d"]), y: axis(["ArrowUp", "w"], ["ArrowDown", "s"]) };
  client.send(INPUT, encode(SteerCodec, steer));
}, 50);

// Each frame: every runner 100 ms in the past, blended between two snapshots.
function frame(): void {
  draw.clearRect(0, 0, canvas.width, canvas.height);
  for (const { fields } of view.sample(performance.now()).values()) {
    const [x = 0, y = 0] = fields.position;
    draw.fillStyle = fields.it ? "#e63946" : fields.seat === mirror.mySeat ? "#2b59c3" : "#6c757d";
    draw.beginPath();
    draw.arc(x * SCALE, y * SCALE, SCALE / 2, 0, 2 * Math.PI);
    draw.fill();
  }
  requestAnimationFrame(frame);
}

requestAnimationFrame(frame);
client.start();
