import { fileURLToPath } from "node:url";

import { defineConfig } from "vite";

// The admin page, built on its own into the server crate (crates/server/assets/admin), which
// embeds it: every tickwire server serves it on its operator listener, with no `make web` and
// no `[web] dir`. Fixed file names, so the committed build changes only when the page does;
// `npm run build:admin` rebuilds it, and web/test/admin.e2e.test.ts fails when it is stale.
export default defineConfig({
  root: fileURLToPath(new URL("./admin/", import.meta.url)),
  base: "/admin/",
  logLevel: "warn",
  build: {
    outDir: fileURLToPath(new URL("../../../crates/server/assets/admin/", import.meta.url)),
    emptyOutDir: true,
    modulePreload: false,
    rollupOptions: {
      output: {
        entryFileNames: "admin.js",
        chunkFileNames: "admin-[name].js",
        assetFileNames: "admin[extname]",
      },
    },
  },
});
