import { fileURLToPath } from "node:url";

import { defineConfig } from "vitest/config";

// The browser end-to-end test: a real `tickwire serve`, bots over WebSocket and Debian's
// chromium driven by playwright-core. Slow by nature, so it has its own config and command
// (`npm run test:e2e`, `make test-e2e`).
export default defineConfig({
  resolve: {
    alias: {
      "@tickwire/client": fileURLToPath(new URL("../src/index.ts", import.meta.url)),
      "@tickwire/arena": fileURLToPath(new URL("../arena/src/index.ts", import.meta.url)),
    },
  },
  test: {
    include: ["test/**/*.e2e.test.ts"],
    testTimeout: 180_000,
    hookTimeout: 60_000,
    fileParallelism: false,
    reporters: [["default", { summary: false }]],
  },
});
