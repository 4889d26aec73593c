// Keyboard and mouse: WASD or the arrows to move, the mouse to aim, a held button to shoot,
// Space to warp through the nearest teleport pad (the server rate-limits it).
// Everything is released when the window loses focus, so a key held while switching away
// never keeps the player running.
import { FIRE, type LocalInput, WARP } from "@tickwire/arena";

const KEYS: Record<string, [number, number]> = {
  KeyW: [0, -1],
  ArrowUp: [0, -1],
  KeyS: [0, 1],
  ArrowDown: [0, 1],
  KeyA: [-1, 0],
  ArrowLeft: [-1, 0],
  KeyD: [1, 0],
  ArrowRight: [1, 0],
};

export class Controls {
  private readonly held = new Set<string>();
  private firing = false;
  private warping = false;
  /** The pointer in CSS pixels of the page. */
  private pointer = { x: 0, y: 0 };
  /** False while typing in the chat (keys go to the text box). */
  enabled = true;

  constructor(target: HTMLElement) {
    window.addEventListener("keydown", (event) => {
      if (!this.enabled) {
        return;
      }
      if (event.code === "Space") {
        this.warping = true;
        event.preventDefault();
      } else if (event.code in KEYS) {
        this.held.add(event.code);
        event.preventDefault();
      }
    });
    window.addEventListener("keyup", (event) => {
      this.held.delete(event.code);
      if (event.code === "Space") {
        this.warping = false;
      }
    });
    target.addEventListener("pointermove", (event) => {
      this.pointer = { x: event.clientX, y: event.clientY };
    });
    target.addEventListener("pointerdown", (event) => {
      this.pointer = { x: event.clientX, y: event.clientY };
      if (event.button === 0 && this.enabled) {
        this.firing = true;
      }
    });
    window.addEventListener("pointerup", () => {
      this.firing = false;
    });
    target.addEventListener("contextmenu", (event) => event.preventDefault());
    window.addEventListener("blur", () => this.release());
  }

  /** Lets go of every key and button. */
  release(): void {
    this.held.clear();
    this.firing = false;
    this.warping = false;
  }

  /** Where the pointer is, in page pixels. */
  get pointerPosition(): { x: number; y: number } {
    return this.pointer;
  }

  /** This frame's input, aiming from `from` (metres) at the pointer (metres, `target`). */
  read(from: { x: number; y: number } | null, target: { x: number; y: number }): LocalInput {
    let moveX = 0;
    let moveY = 0;
    if (this.enabled) {
      for (const code of this.held) {
        const [x, y] = KEYS[code]!;
        moveX += x;
        moveY += y;
      }
    }
    moveX = Math.max(-1, Math.min(1, moveX));
    moveY = Math.max(-1, Math.min(1, moveY));
    let aim = 0;
    if (from !== null) {
      const angle = Math.atan2(target.y - from.y, target.x - from.x);
      aim = Number.isFinite(angle) ? angle : 0;
    }
    const buttons = this.enabled ? (this.firing ? FIRE : 0) | (this.warping ? WARP : 0) : 0;
    return { moveX, moveY, aim, buttons };
  }
}
