import { fileURLToPath } from "node:url";

import { defineConfig } from "vite";

// The SDK packages are used from their source (../src, ../arena/src), so the demo always runs the code the SDK's
// tests check, with no separate build step. `npm run dev` proxies the API and the
// WebSocket to a `tickwire serve` on :8080.
export default defineConfig({
  resolve: {
    alias: {
      "@tickwire/client": fileURLToPath(new URL("../src/index.ts", import.meta.url)),
      "@tickwire/arena": fileURLToPath(new URL("../arena/src/index.ts", import.meta.url)),
    },
  },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // The arena page alone: the admin page is built into the server (vite.admin.config.ts).
    rollupOptions: {
      input: {
        arena: fileURLToPath(new URL("./index.html", import.meta.url)),
      },
    },
    // pixi.js is most of the bundle; one chunk is fine for a demo served from localhost.
    chunkSizeWarningLimit: 2048,
  },
  server: {
    proxy: {
      "/api": "http://127.0.0.1:8080",
      "/ws": { target: "ws://127.0.0.1:8080", ws: true },
    },
  },
});
